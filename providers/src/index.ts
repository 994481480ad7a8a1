/** The providers embedded mode and the operator use; the kubernetes provider is `@berth/providers/kubernetes`, so that embedded mode never loads the Kubernetes client. */
export * from './registry.js';
export * from './mock.js';
export * from './local/index.js';
export * from './byoi.js';
export * from './remote/client.js';
export * from './remote/server.js';
export * from './guest.js';
