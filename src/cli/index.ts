// First, before anything else loads and the first garbage collections run: see edge/tick-shape.ts.
import './early.js';
import { main } from './main.js';

// -1: a long-running command (serve) that sets the exit code itself when it stops.
const code = await main(process.argv.slice(2));
if (code !== -1) process.exitCode = code;
