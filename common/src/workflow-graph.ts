/**
 * Workflows as pure data: the graph of steps (validation), the template of a step's input
 * (parse, check, render) and the cost estimate. No I/O; the API validates with these on
 * create and update, the operator's driver renders and plans with them (ADR 26).
 */

/** A step as stored: `definitionId` is the `adef_…` the step's `agent` named when it was written. */
export interface WorkflowStep {
  name: string;
  agent: string;
  definitionId: string;
  /** The step's task, a template (see `parseTemplate`). */
  input: string;
  dependsOn: string[];
  /** Further attempts after a failed one. */
  retries: number;
  /** Bound of one attempt, as a duration such as `10m`; null: the agent's own timeout only. */
  timeout: string | null;
  /** A failure (after retries) does not fail the run: it ends `partial`. */
  optional: boolean;
}

/** A problem with a workflow's steps, naming the field as the API's 422 details do. */
export interface GraphProblem {
  field: string;
  message: string;
}

export const STEP_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

/** A `{{ … }}` expression of a template. */
export type TemplateExpression = { kind: 'input'; path: string[] } | { kind: 'step'; step: string };

export type TemplatePart = { text: string } | { expression: TemplateExpression; source: string };

const EXPRESSION = /\{\{\s*([^{}]*?)\s*\}\}/g;
const INPUT_PATH = /^input((?:\.[A-Za-z0-9_-]+)*)$/;
const STEP_OUTPUT = /^steps\.([a-z][a-z0-9_-]{0,62})\.output$/;

/**
 * Splits a template into text and expressions. Expressions are exactly `{{input}}`,
 * `{{input.a.b}}` (a path into an object input) and `{{steps.<name>.output}}`, with optional
 * spaces inside the braces; anything else between `{{` and `}}`, or a `{{` or `}}` left over,
 * is an error (thrown as a message). Nothing is evaluated.
 */
export function parseTemplate(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let last = 0;
  for (const match of template.matchAll(EXPRESSION)) {
    const text = template.slice(last, match.index);
    assertNoBraces(text);
    if (text) parts.push({ text });
    const source = match[1]!;
    const input = INPUT_PATH.exec(source);
    const step = STEP_OUTPUT.exec(source);
    if (input) parts.push({ expression: { kind: 'input', path: input[1]!.split('.').filter(Boolean) }, source });
    else if (step) parts.push({ expression: { kind: 'step', step: step[1]! }, source });
    else throw new Error(`{{${source}}} is not an expression; use {{input}}, {{input.<field>}} or {{steps.<name>.output}}`);
    last = match.index + match[0].length;
  }
  const rest = template.slice(last);
  assertNoBraces(rest);
  if (rest) parts.push({ text: rest });
  return parts;
}

function assertNoBraces(text: string): void {
  if (text.includes('{{') || text.includes('}}')) throw new Error('an unmatched {{ or }}; expressions are {{input}}, {{input.<field>}} or {{steps.<name>.output}}');
}

/** The text a value is templated as: a string as it is, null or missing as nothing, anything else as its JSON. */
function asText(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * Renders a checked template: `{{input}}` is the run's input, `{{input.a.b}}` the value at that
 * path of an object input (nothing when the path is absent), `{{steps.x.output}}` the output
 * text of step x (nothing when x is an optional step that failed).
 */
export function renderTemplate(template: string, input: unknown, outputs: ReadonlyMap<string, string | null>): string {
  return parseTemplate(template)
    .map((part) => {
      if ('text' in part) return part.text;
      const { expression } = part;
      if (expression.kind === 'step') return outputs.get(expression.step) ?? '';
      let value: unknown = input;
      for (const key of expression.path) {
        value = value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>)[key] : undefined;
      }
      return asText(value);
    })
    .join('');
}

/** Every step a step waits for, directly or through others (the graph must be acyclic). */
export function ancestorsOf(steps: readonly Pick<WorkflowStep, 'name' | 'dependsOn'>[], name: string): Set<string> {
  const byName = new Map(steps.map((step) => [step.name, step]));
  const seen = new Set<string>();
  const stack = [...(byName.get(name)?.dependsOn ?? [])];
  while (stack.length > 0) {
    const next = stack.pop()!;
    if (seen.has(next)) continue;
    seen.add(next);
    stack.push(...(byName.get(next)?.dependsOn ?? []));
  }
  return seen;
}

/**
 * The problems of a workflow's steps, in field order; none means it can run. Names are unique;
 * dependencies name other steps of the workflow, once each, and form no cycle; each input is a
 * template whose `{{steps.x.output}}` names a step it depends on, directly or through others.
 */
export function validateSteps(steps: readonly Pick<WorkflowStep, 'name' | 'dependsOn' | 'input'>[]): GraphProblem[] {
  const problems: GraphProblem[] = [];
  const names = new Map<string, number>();
  steps.forEach((step, index) => {
    if (names.has(step.name)) problems.push({ field: `steps.${index}.name`, message: `"${step.name}" is also the name of step ${names.get(step.name)}` });
    else names.set(step.name, index);
  });
  steps.forEach((step, index) => {
    const seen = new Set<string>();
    step.dependsOn.forEach((dependency, position) => {
      const field = `steps.${index}.dependsOn.${position}`;
      if (dependency === step.name) problems.push({ field, message: `step "${step.name}" cannot depend on itself` });
      else if (!names.has(dependency)) problems.push({ field, message: `no step is named "${dependency}"` });
      else if (seen.has(dependency)) problems.push({ field, message: `"${dependency}" is named twice` });
      seen.add(dependency);
    });
  });
  if (problems.length > 0) return problems;

  const cycle = findCycle(steps);
  if (cycle) {
    const index = names.get(cycle[0]!)!;
    problems.push({ field: `steps.${index}.dependsOn`, message: `the steps form a cycle: ${cycle.join(' → ')}` });
    return problems;
  }

  steps.forEach((step, index) => {
    let parts: TemplatePart[];
    try {
      parts = parseTemplate(step.input);
    } catch (error) {
      problems.push({ field: `steps.${index}.input`, message: (error as Error).message });
      return;
    }
    const ancestors = ancestorsOf(steps, step.name);
    for (const part of parts) {
      if ('text' in part || part.expression.kind !== 'step') continue;
      const referenced = part.expression.step;
      if (!names.has(referenced)) problems.push({ field: `steps.${index}.input`, message: `{{${part.source}}}: no step is named "${referenced}"` });
      else if (!ancestors.has(referenced)) {
        problems.push({ field: `steps.${index}.input`, message: `{{${part.source}}}: step "${step.name}" must depend on "${referenced}" (in dependsOn, directly or through other steps) to use its output` });
      }
    }
  });
  return problems;
}

/** A cycle of the dependency graph as a path that ends where it starts, or undefined. */
export function findCycle(steps: readonly Pick<WorkflowStep, 'name' | 'dependsOn'>[]): string[] | undefined {
  const byName = new Map(steps.map((step) => [step.name, step]));
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (name: string): string[] | undefined => {
    if (state.get(name) === 'done') return undefined;
    if (state.get(name) === 'visiting') return [...path.slice(path.indexOf(name)), name];
    state.set(name, 'visiting');
    path.push(name);
    for (const dependency of byName.get(name)?.dependsOn ?? []) {
      const cycle = visit(dependency);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(name, 'done');
    return undefined;
  };
  for (const step of steps) {
    const cycle = visit(step.name);
    if (cycle) return cycle;
  }
  return undefined;
}

/**
 * The steps whose output is the run's output: those no other step depends on. The run's output
 * is the output of the last of them in the order the steps are listed.
 */
export function finalStepOf(steps: readonly Pick<WorkflowStep, 'name' | 'dependsOn'>[]): string {
  const needed = new Set(steps.flatMap((step) => step.dependsOn));
  const sinks = steps.filter((step) => !needed.has(step.name));
  return (sinks.at(-1) ?? steps.at(-1)!).name;
}

// ---- planning a run ----

export type StepAttemptState = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';

/** The latest attempt of a step, as its job stands. */
export interface StepAttempt {
  step: string;
  attempt: number;
  state: StepAttemptState;
  output: string | null;
  error: { code: string; message: string } | null;
}

export type RunPlan =
  | { kind: 'continue'; start: { step: string; attempt: number }[] }
  | { kind: 'failed'; step: string; error: { code: string; message: string }; attempts: number }
  | { kind: 'done'; status: 'completed' | 'partial'; failedOptional: string[] };

/**
 * What a run does next, from its steps and each step's latest attempt (a pure function of what
 * the driver read). A failed attempt with retries left is tried again (attempt + 1); a required
 * step failed with none left fails the run; an optional one counts as settled, its output empty.
 * A step starts once every dependency is settled. A cancelled attempt is treated as failed (a
 * timeout or a cancel of the job alone). When every step is settled the run is `completed`, or
 * `partial` when an optional step failed.
 */
export function planRun(steps: readonly WorkflowStep[], latest: ReadonlyMap<string, StepAttempt>): RunPlan {
  const settled = new Set<string>();
  const failedOptional: string[] = [];
  const start: { step: string; attempt: number }[] = [];
  for (const step of steps) {
    const attempt = latest.get(step.name);
    if (!attempt) continue;
    if (attempt.state === 'completed') settled.add(step.name);
    else if (attempt.state === 'failed' || attempt.state === 'cancelled') {
      if (attempt.attempt <= step.retries) start.push({ step: step.name, attempt: attempt.attempt + 1 });
      else if (step.optional) {
        settled.add(step.name);
        failedOptional.push(step.name);
      } else {
        return { kind: 'failed', step: step.name, error: attempt.error ?? { code: 'failed', message: `step ${step.name} failed` }, attempts: attempt.attempt };
      }
    }
  }
  for (const step of steps) {
    if (!latest.has(step.name) && step.dependsOn.every((dependency) => settled.has(dependency))) start.push({ step: step.name, attempt: 1 });
  }
  if (settled.size === steps.length) return { kind: 'done', status: failedOptional.length > 0 ? 'partial' : 'completed', failedOptional };
  return { kind: 'continue', start };
}

// ---- estimates ----

export type EstimateConfidence = 'low' | 'medium' | 'high';

/** Cents per step when a workflow has no completed run: the spec's heuristic. */
export const HEURISTIC_STEP_CENTS = { min: 5, max: 50 } as const;

/** `low` under 10 completed runs, `medium` for 10 to 99, `high` from 100. */
export function estimateConfidence(completedRuns: number): EstimateConfidence {
  if (completedRuns >= 100) return 'high';
  if (completedRuns >= 10) return 'medium';
  return 'low';
}

export interface WorkflowEstimate {
  estimated: { min: number; max: number; currency: string };
  confidence: EstimateConfidence;
  breakdown: { step: string; min: number; max: number; basedOn: number }[];
  basedOn: number;
}

/**
 * The estimate of a workflow's next run. `runCosts` are the total costs (cents) of its completed
 * runs; `stepCosts` the costs of each step's completed attempts in those runs, by step name.
 * With completed runs, the total is their min and max; without, stepCount × 5 to stepCount × 50.
 * Each step's breakdown is the min and max of its own history, or 5 to 50 when it has none.
 */
export function estimateWorkflow(
  steps: readonly Pick<WorkflowStep, 'name'>[],
  runCosts: readonly number[],
  stepCosts: ReadonlyMap<string, readonly number[]>,
  currency: string,
): WorkflowEstimate {
  const breakdown = steps.map((step) => {
    const costs = stepCosts.get(step.name) ?? [];
    return costs.length > 0
      ? { step: step.name, min: Math.min(...costs), max: Math.max(...costs), basedOn: costs.length }
      : { step: step.name, min: HEURISTIC_STEP_CENTS.min, max: HEURISTIC_STEP_CENTS.max, basedOn: 0 };
  });
  const estimated =
    runCosts.length > 0
      ? { min: Math.min(...runCosts), max: Math.max(...runCosts), currency }
      : { min: steps.length * HEURISTIC_STEP_CENTS.min, max: steps.length * HEURISTIC_STEP_CENTS.max, currency };
  return { estimated, confidence: estimateConfidence(runCosts.length), breakdown, basedOn: runCosts.length };
}
