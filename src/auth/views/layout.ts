import { html, type SafeHtml } from './html.js';

export interface PageOptions {
  title: string;
  body: SafeHtml;
  /** The signed-in user's name, for the header. */
  user?: string;
  /** CSRF token for the header's sign-out form. */
  csrf?: string;
}

/** A whole page in the site's layout. */
export function page(opts: PageOptions): string {
  const nav =
    opts.user !== undefined
      ? html`<nav aria-label="Account"><a href="/account/applications">Applications</a><span class="muted">${opts.user}</span>
<form class="inline" method="post" action="/logout"><input type="hidden" name="csrf_token" value="${opts.csrf ?? ''}"><button class="link" type="submit">Sign out</button></form></nav>`
      : html`<nav aria-label="Account"><a href="/login">Sign in</a></nav>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${opts.title} · sleeve</title>
<link rel="stylesheet" href="/static/sleeve.css">
</head>
<body>
<header><a class="brand" href="/">sleeve</a>${nav}</header>
<main>
<h1>${opts.title}</h1>
${opts.body}
</main>
</body>
</html>
`.value;
}
