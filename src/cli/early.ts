// Runs before every other module of the CLI loads (imported first by index.ts).
import { keepTickShape } from '../edge/tick-shape.js';

keepTickShape();
