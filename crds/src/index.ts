export * from './duration.js';
export * from './common.js';
export * from './session.js';
export * from './agent.js';
