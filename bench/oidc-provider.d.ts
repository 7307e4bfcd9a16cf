// oidc-provider 8 ships no types; the benchmark peer uses it untyped.
declare module 'oidc-provider';
