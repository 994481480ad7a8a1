import { describe, expect, it } from 'vitest';
import {
  estimateConfidence,
  estimateWorkflow,
  finalStepOf,
  findCycle,
  parseTemplate,
  planRun,
  renderTemplate,
  validateSteps,
  type StepAttempt,
  type WorkflowStep,
} from './workflow-graph.js';

const step = (name: string, dependsOn: string[] = [], input = '{{input}}', extra: Partial<WorkflowStep> = {}): WorkflowStep => ({
  name,
  agent: 'a',
  definitionId: 'adef_x',
  input,
  dependsOn,
  retries: 0,
  timeout: null,
  optional: false,
  ...extra,
});

describe('validateSteps', () => {
  it('accepts a sequence and a step that joins two earlier ones, listed in any order', () => {
    expect(validateSteps([step('a'), step('b', ['a'], 'x {{steps.a.output}}'), step('c', ['a']), step('d', ['b', 'c'], '{{steps.a.output}} {{steps.c.output}}')])).toEqual([]);
    expect(validateSteps([step('b', ['a']), step('a')])).toEqual([]);
  });

  it.each([
    ['an unknown dependency', [step('a', ['nope'])], 'steps.0.dependsOn.0', 'no step is named "nope"'],
    ['a dependency on itself', [step('a', ['a'])], 'steps.0.dependsOn.0', 'cannot depend on itself'],
    ['a dependency named twice', [step('a'), step('b', ['a', 'a'])], 'steps.1.dependsOn.1', 'named twice'],
    ['a repeated name', [step('a'), step('a')], 'steps.1.name', 'also the name of step 0'],
    ['a cycle of three', [step('a', ['c']), step('b', ['a']), step('c', ['b'])], 'steps.0.dependsOn', 'a → c → b → a'],
    ['a cycle of two', [step('x'), step('a', ['b']), step('b', ['a'])], 'steps.1.dependsOn', 'cycle'],
    ['the output of a step it does not depend on', [step('a'), step('b', [], '{{steps.a.output}}')], 'steps.1.input', 'must depend on "a"'],
    ['the output of an unknown step', [step('a', [], '{{steps.zz.output}}')], 'steps.0.input', 'no step is named "zz"'],
    ['an expression that is not one', [step('a', [], '{{ process.exit() }}')], 'steps.0.input', 'is not an expression'],
    ['an unmatched brace', [step('a', [], 'hello {{input')], 'steps.0.input', 'unmatched'],
  ])('refuses %s, naming the field', (_what, steps, field, message) => {
    const problems = validateSteps(steps);
    expect(problems.map((problem) => problem.field)).toContain(field);
    expect(problems.find((problem) => problem.field === field)!.message).toContain(message);
  });

  it('lets a step use the output of a step it depends on through another', () => {
    expect(validateSteps([step('a'), step('b', ['a']), step('c', ['b'], '{{steps.a.output}}')])).toEqual([]);
  });

  it('finds no cycle in a diamond', () => {
    expect(findCycle([step('a'), step('b', ['a']), step('c', ['a']), step('d', ['b', 'c'])])).toBeUndefined();
  });
});

describe('templates', () => {
  it('parse into text and the three kinds of expression, spaces inside braces allowed', () => {
    expect(parseTemplate('A {{ input }} B {{input.city.name}} C {{steps.s-1.output}}')).toEqual([
      { text: 'A ' },
      { expression: { kind: 'input', path: [] }, source: 'input' },
      { text: ' B ' },
      { expression: { kind: 'input', path: ['city', 'name'] }, source: 'input.city.name' },
      { text: ' C ' },
      { expression: { kind: 'step', step: 's-1' }, source: 'steps.s-1.output' },
    ]);
  });

  it('render the input as text or JSON, paths into objects, and step outputs; nothing is evaluated', () => {
    const outputs = new Map<string, string | null>([['a', 'out-a']]);
    expect(renderTemplate('{{input}}', 'plain', outputs)).toBe('plain');
    expect(renderTemplate('{{input}}', { x: 1 }, outputs)).toBe('{"x":1}');
    expect(renderTemplate('{{input.x}}/{{input.y.z}}/{{input.missing}}/{{input.list}}', { x: 1, y: { z: 'deep' }, list: [1, 2] }, outputs)).toBe('1/deep//[1,2]');
    expect(renderTemplate('{{input.x}}', 'text has no fields', outputs)).toBe('');
    expect(renderTemplate('got {{steps.a.output}} and "{{steps.b.output}}"', null, outputs)).toBe('got out-a and ""');
    // A value that looks like a template is not expanded again.
    expect(renderTemplate('{{input.t}}', { t: '{{steps.a.output}}' }, outputs)).toBe('{{steps.a.output}}');
  });
});

describe('planRun', () => {
  const steps = [step('a'), step('b', ['a'], '{{steps.a.output}}', { retries: 1 }), step('c', ['b'], '{{steps.b.output}}', { optional: true })];
  const attempt = (name: string, n: number, state: StepAttempt['state']): [string, StepAttempt] => [
    name,
    { step: name, attempt: n, state, output: state === 'completed' ? `${name}!` : null, error: state === 'failed' ? { code: 'provider_error', message: 'no' } : null },
  ];

  it('starts the steps without dependencies first, then each once its dependencies ended', () => {
    expect(planRun(steps, new Map())).toEqual({ kind: 'continue', start: [{ step: 'a', attempt: 1 }] });
    expect(planRun(steps, new Map([attempt('a', 1, 'running')]))).toEqual({ kind: 'continue', start: [] });
    expect(planRun(steps, new Map([attempt('a', 1, 'completed')]))).toEqual({ kind: 'continue', start: [{ step: 'b', attempt: 1 }] });
  });

  it('retries a failed attempt while retries are left, then fails the run on a required step', () => {
    const failedOnce = new Map([attempt('a', 1, 'completed'), attempt('b', 1, 'failed')]);
    expect(planRun(steps, failedOnce)).toEqual({ kind: 'continue', start: [{ step: 'b', attempt: 2 }] });
    const failedTwice = new Map([attempt('a', 1, 'completed'), attempt('b', 2, 'failed')]);
    expect(planRun(steps, failedTwice)).toEqual({ kind: 'failed', step: 'b', error: { code: 'provider_error', message: 'no' }, attempts: 2 });
  });

  it('ends completed when every step completed, partial when an optional step failed', () => {
    expect(planRun(steps, new Map([attempt('a', 1, 'completed'), attempt('b', 2, 'completed'), attempt('c', 1, 'completed')]))).toEqual({
      kind: 'done',
      status: 'completed',
      failedOptional: [],
    });
    expect(planRun(steps, new Map([attempt('a', 1, 'completed'), attempt('b', 1, 'completed'), attempt('c', 1, 'failed')]))).toEqual({
      kind: 'done',
      status: 'partial',
      failedOptional: ['c'],
    });
  });

  it('runs the dependents of an optional step that failed', () => {
    const withTail = [step('a', [], '{{input}}', { optional: true }), step('b', ['a'], '{{steps.a.output}}')];
    expect(planRun(withTail, new Map([attempt('a', 1, 'failed')]))).toEqual({ kind: 'continue', start: [{ step: 'b', attempt: 1 }] });
  });

  it('names the output step: the last step nothing depends on', () => {
    expect(finalStepOf(steps)).toBe('c');
    expect(finalStepOf([step('a'), step('b'), step('c', ['a'])])).toBe('c');
    expect(finalStepOf([step('c', ['a']), step('a'), step('b')])).toBe('b');
  });
});

describe('estimates', () => {
  it('has exact confidence boundaries', () => {
    expect([0, 9, 10, 99, 100, 1000].map(estimateConfidence)).toEqual(['low', 'low', 'medium', 'medium', 'high', 'high']);
  });

  it('without completed runs is stepCount × 5 to stepCount × 50 cents, low', () => {
    expect(estimateWorkflow([step('a'), step('b'), step('c')], [], new Map(), 'usd')).toEqual({
      estimated: { min: 15, max: 150, currency: 'usd' },
      confidence: 'low',
      breakdown: ['a', 'b', 'c'].map((name) => ({ step: name, min: 5, max: 50, basedOn: 0 })),
      basedOn: 0,
    });
  });

  it('with completed runs is the min and max of their costs, per step of the steps’ own', () => {
    const estimate = estimateWorkflow([step('a'), step('b')], [12, 7, 30], new Map([['a', [2, 9, 4]]]), 'usd');
    expect(estimate).toEqual({
      estimated: { min: 7, max: 30, currency: 'usd' },
      confidence: 'low',
      breakdown: [
        { step: 'a', min: 2, max: 9, basedOn: 3 },
        { step: 'b', min: 5, max: 50, basedOn: 0 },
      ],
      basedOn: 3,
    });
  });
});
