export * from './app.js';
export * from './http/route.js';
export * from './services/agents.js';
export * from './services/sessions.js';
