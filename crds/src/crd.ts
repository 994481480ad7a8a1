import { z } from 'zod';
import { API_VERSION, GROUP, KINDS, VERSION, type KindDefinition, type KindName } from './kinds.js';

type JsonSchema = Record<string, unknown>;

const SAFE_INTEGER_BOUND = Number.MAX_SAFE_INTEGER;

/**
 * Turns a zod-generated OpenAPI 3.0 schema into a Kubernetes structural schema: every node
 * typed, no `additionalProperties: false` (the API server prunes and `kubectl` rejects
 * unknown fields instead), free-form objects and unions of several types marked
 * `x-kubernetes-preserve-unknown-fields`, and zod's safe-integer bounds dropped.
 */
export function structural(schema: JsonSchema): JsonSchema {
  if (Array.isArray(schema.anyOf) || Array.isArray(schema.oneOf)) {
    const { description, default: fallback } = schema;
    return {
      'x-kubernetes-preserve-unknown-fields': true,
      ...(description !== undefined ? { description } : {}),
      ...(fallback !== undefined ? { default: fallback } : {}),
    };
  }
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    switch (key) {
      case '$schema':
      case 'propertyNames':
        break;
      case 'properties':
        out.properties = Object.fromEntries(
          Object.entries(value as Record<string, JsonSchema>).map(([name, property]) => [name, structural(property)]),
        );
        break;
      case 'items':
        out.items = structural(value as JsonSchema);
        break;
      case 'additionalProperties':
        if (value === false) break;
        if (typeof value === 'object' && value !== null && Object.keys(value).length === 0) {
          out['x-kubernetes-preserve-unknown-fields'] = true;
        } else {
          out.additionalProperties = structural(value as JsonSchema);
        }
        break;
      case 'maximum':
        if (value !== SAFE_INTEGER_BOUND) out.maximum = value;
        break;
      case 'minimum':
        if (value !== -SAFE_INTEGER_BOUND) out.minimum = value;
        break;
      default:
        out[key] = value;
    }
  }
  return out;
}

function openApi(schema: z.ZodType): JsonSchema {
  return structural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }) as JsonSchema);
}

/** The CustomResourceDefinition of one kind: namespaced, v1alpha1, with the status subresource. */
export function customResourceDefinition(definition: KindDefinition): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${definition.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: definition.kind,
        listKind: `${definition.kind}List`,
        plural: definition.plural,
        singular: definition.singular,
        shortNames: definition.shortNames,
        categories: ['berth'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: definition.printerColumns,
          schema: {
            openAPIV3Schema: {
              description: definition.description,
              type: 'object',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: openApi(definition.spec),
                status: openApi(definition.status),
              },
            },
          },
        },
      ],
    },
  };
}

export function allCustomResourceDefinitions(): { kind: KindName; crd: Record<string, unknown> }[] {
  return (Object.keys(KINDS) as KindName[]).map((kind) => ({ kind, crd: customResourceDefinition(KINDS[kind]) }));
}

export { API_VERSION };
