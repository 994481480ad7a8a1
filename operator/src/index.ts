export * from './operator.js';
export * from './controllers/agent.js';
export * from './controllers/conditions.js';
export * from './runtime/controller.js';
export * from './runtime/workqueue.js';
export * from './providers/registry.js';
export * from './providers/mock.js';
export * from './providers/local/index.js';
