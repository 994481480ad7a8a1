/** Cluster-mode parts, kept out of the main entry so that embedded mode never loads the Kubernetes client. */
export * from './runtime/leader.js';
