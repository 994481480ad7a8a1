import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { customResourceDefinition } from './crd.js';
import { renderGeneratedFiles, staleFiles } from './generate.js';
import { KINDS } from './kinds.js';

describe('generated CRDs', () => {
  it('are up to date with the zod schemas (run `npm run generate` when this fails)', () => {
    expect(staleFiles()).toEqual([]);
  });

  it('cover every kind, as plain manifests and as chart templates', () => {
    const paths = [...renderGeneratedFiles().keys()];
    for (const { plural } of Object.values(KINDS)) {
      expect(paths).toContain(`crds/manifests/${plural}.berth.dev.yaml`);
      expect(paths).toContain(`charts/berth/templates/crds/${plural}.yaml`);
    }
  });

  it('are structural: every field typed or explicitly free-form, no additionalProperties: false', () => {
    const visit = (schema: Record<string, any>, path: string) => {
      expect(schema.additionalProperties, path).not.toBe(false);
      expect(schema.anyOf, path).toBeUndefined();
      if (!schema['x-kubernetes-preserve-unknown-fields']) expect(schema.type, path).toBeDefined();
      for (const [name, property] of Object.entries(schema.properties ?? {})) visit(property as any, `${path}.${name}`);
      if (schema.items) visit(schema.items, `${path}[]`);
      if (typeof schema.additionalProperties === 'object') visit(schema.additionalProperties, `${path}{}`);
    };
    for (const definition of Object.values(KINDS)) {
      const crd = customResourceDefinition(definition) as any;
      visit(crd.spec.versions[0].schema.openAPIV3Schema, definition.kind);
    }
  });

  it('constrain the Agent spec: enums, the timeout pattern and required fields', () => {
    const crd = parse(renderGeneratedFiles().get('crds/manifests/agents.berth.dev.yaml')!);
    const version = crd.spec.versions[0];
    const spec = version.schema.openAPIV3Schema.properties.spec;
    expect(spec.properties.compute.enum).toEqual(['python', 'node', 'go']);
    expect(spec.properties.desiredState.enum).toEqual(['active', 'paused', 'terminated']);
    expect(spec.properties.timeout).toMatchObject({ type: 'string', minLength: 2, pattern: '^([0-9]+h)?([0-9]+m)?([0-9]+s)?$' });
    expect(spec.required).toEqual(expect.arrayContaining(['sessionId', 'compute', 'timeout', 'provider']));
    expect(version.subresources).toEqual({ status: {} });
    expect(crd.spec.names.shortNames).toEqual(['agt']);
    expect(version.additionalPrinterColumns.map((column: any) => column.name)).toEqual(['Session', 'Phase', 'Compute', 'Provider', 'Cost', 'Age']);
  });
});
