/** Types of generate-types.mjs for the TypeScript that imports it (the drift test). */
export declare const GENERATED_FILE: string;
export declare function generateTypes(document: unknown): string;
export declare function typeOf(schema: unknown, indent?: string): string;
