import { main } from './main.js';

// -1: a long-running command (serve) that sets the exit code itself when it stops.
const code = await main(process.argv.slice(2));
if (code !== -1) process.exitCode = code;
