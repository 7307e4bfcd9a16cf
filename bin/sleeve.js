#!/usr/bin/env node
// The bundled CLI (npm run build makes it: tsc, then scripts/bundle.mjs).
import '../dist/bundle/index.js';
