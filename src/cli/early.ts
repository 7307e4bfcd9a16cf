// Runs before every other module of the CLI loads (imported first by index.ts).
import { keepTickShape } from '../shared/tick-shape.js';

keepTickShape();
