import { z } from 'zod';

/**
 * Guardrails: checks of what goes into the model (the task and tool results: `input`) and what
 * comes out of it (its answers: `output`). Each rule has an action: `block` ends the run with
 * `guardrail_blocked`, `redact` replaces what it found, `flag` only records it.
 */
export const GUARDRAIL_ACTIONS = ['block', 'redact', 'flag'] as const;
export type GuardrailAction = (typeof GUARDRAIL_ACTIONS)[number];
export type GuardrailWhere = 'input' | 'output';

export const PII_KINDS = ['email', 'phone', 'card', 'secret_key'] as const;
export type PiiKind = (typeof PII_KINDS)[number];

const whereSchema = z
  .array(z.enum(['input', 'output']))
  .min(1)
  .max(2)
  .describe('which side the rule checks: `input` (the task and tool results) and/or `output` (the model\'s answers)');

const piiRule = z
  .object({
    action: z.enum(GUARDRAIL_ACTIONS),
    kinds: z.array(z.enum(PII_KINDS)).min(1).max(PII_KINDS.length).default([...PII_KINDS]).describe('what counts as PII; default all'),
    on: whereSchema.default(['input', 'output']),
  })
  .strict();

const injectionRule = z
  .object({ action: z.enum(['block', 'flag']).describe('redacting an injection would leave its intent: block or flag only') })
  .strict()
  .describe('prompt-injection heuristics on tool results');

const denyListRule = z
  .object({
    action: z.enum(GUARDRAIL_ACTIONS),
    terms: z.array(z.string().min(1).max(200)).min(1).max(200).describe('words or phrases, matched case-insensitively'),
    on: whereSchema.default(['input', 'output']),
  })
  .strict();

const maxOutputRule = z
  .object({
    chars: z.number().int().min(1).max(1_000_000),
    action: z.enum(['block', 'redact', 'flag']).describe('`redact` cuts the answer at the limit'),
  })
  .strict()
  .describe("longest model answer, in characters");

export const guardrailsSchema = z
  .object({
    pii: piiRule.optional(),
    promptInjection: injectionRule.optional(),
    denyList: denyListRule.optional(),
    maxOutputChars: maxOutputRule.optional(),
  })
  .strict()
  .refine((rules) => Object.keys(rules).length > 0, 'name at least one rule: pii, promptInjection, denyList, maxOutputChars')
  .meta({ id: 'Guardrails' });
export type Guardrails = z.infer<typeof guardrailsSchema>;

export type GuardrailRule = 'pii' | 'promptInjection' | 'denyList' | 'maxOutputChars';

/** One rule firing on one text. */
export interface GuardrailHit {
  rule: GuardrailRule;
  action: GuardrailAction;
  where: GuardrailWhere;
  /** What it found: a PII kind, `injection`, `deny_list`, `size`. */
  kind: string;
  count: number;
  /** Where the text came from: `task`, `tool:<name>`, `answer`. */
  source: string;
}

export interface ScreenResult {
  text: string;
  hits: GuardrailHit[];
  /** The first hit whose action is block. */
  blocked?: GuardrailHit;
}

/** A match of a detector: where it is in the text. */
export interface Finding {
  start: number;
  end: number;
}

/** Luhn checksum of a digit string. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return digits.length > 0 && sum % 10 === 0;
}

function findAll(text: string, pattern: RegExp, accept: (match: string) => boolean = () => true): Finding[] {
  const found: Finding[] = [];
  for (const match of text.matchAll(pattern)) {
    const value = match[0];
    if (accept(value)) found.push({ start: match.index, end: match.index + value.length });
  }
  return found;
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
// Card numbers: 13–19 digits, optionally grouped by spaces or dashes, that pass Luhn.
const CARD = /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])/g;
// Phone numbers: international (+ and 8–15 digits) or North-American style (3-3-4), grouped by
// spaces, dots, dashes or parentheses.
const PHONE = /(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,4}|\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4})(?![\w])/g;
// Keys and tokens of well-known shapes, and long `key=`/`token:` assignments.
const SECRET_KEY = new RegExp(
  [
    'sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}',
    'gh[pousr]_[A-Za-z0-9]{36,}',
    'github_pat_[A-Za-z0-9_]{22,}',
    'AKIA[0-9A-Z]{16}',
    'xox[abprs]-[A-Za-z0-9-]{10,}',
    'AIza[0-9A-Za-z_-]{35}',
    'eyJ[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]{10,}',
    '-----BEGIN [A-Z ]*PRIVATE KEY-----',
  ].join('|'),
  'g',
);

export const PII_DETECTORS: Record<PiiKind, (text: string) => Finding[]> = {
  email: (text) => findAll(text, EMAIL),
  card: (text) => findAll(text, CARD, (value) => luhnValid(value.replace(/[ -]/g, ''))),
  phone: (text) =>
    findAll(text, PHONE, (value) => {
      const digits = value.replace(/\D/g, '').length;
      return digits >= 10 && digits <= 15;
    }),
  secret_key: (text) => findAll(text, SECRET_KEY),
};

/**
 * Prompt-injection heuristics: phrases that address the model rather than inform it. Tool
 * results are data; text in them that tells the model to drop its instructions is the signature
 * of an injection.
 */
const INJECTION_PATTERNS = [
  /\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|all|your|the system)\b[^.\n]{0,20}\b(?:instructions?|prompts?|rules?|directions?|guidelines?)/i,
  /\byou are now\b[^.\n]{0,60}\b(?:mode|assistant|ai|model|dan|jailbroken)\b/i,
  /\b(?:new|updated|real) (?:system )?instructions?\s*:/i,
  /\b(?:reveal|print|show|output|repeat)\b[^.\n]{0,30}\b(?:system prompt|your instructions|hidden prompt)/i,
  /<\s*\/?\s*(?:system|im_start|im_end)\s*>|\[\/?INST\]|<\|im_start\|>/i,
  /\bdo not (?:tell|inform|alert) the user\b/i,
];

export function detectInjection(text: string): Finding[] {
  const found: Finding[] = [];
  for (const pattern of INJECTION_PATTERNS) {
    const match = pattern.exec(text);
    if (match) found.push({ start: match.index, end: match.index + match[0].length });
  }
  return found;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function detectTerms(text: string, terms: string[]): Finding[] {
  const pattern = new RegExp(terms.map(escapeRegExp).join('|'), 'gi');
  return findAll(text, pattern);
}

/** Replaces the findings (which may overlap) by `[REDACTED:<label>]`. */
export function redact(text: string, findings: Finding[], label: string): string {
  const sorted = [...findings].sort((a, b) => a.start - b.start);
  let out = '';
  let at = 0;
  for (const finding of sorted) {
    if (finding.end <= at) continue;
    out += text.slice(at, Math.max(at, finding.start));
    if (finding.start >= at) out += `[REDACTED:${label}]`;
    at = finding.end;
  }
  return out + text.slice(at);
}

/**
 * Applies the guardrails that check `where` to one text; returns the text as it may go on
 * (redacted where a rule redacts) and what fired. Checks run in a fixed order (deny list, PII,
 * injection, size), each on the text the previous ones left.
 */
export function screenText(guardrails: Guardrails | undefined, text: string, where: GuardrailWhere, source: string): ScreenResult {
  const hits: GuardrailHit[] = [];
  if (!guardrails || text.length === 0) return { text, hits };
  let current = text;
  const apply = (rule: GuardrailRule, action: GuardrailAction, kind: string, findings: Finding[]) => {
    if (findings.length === 0) return;
    hits.push({ rule, action, where, kind, count: findings.length, source });
    if (action === 'redact') current = redact(current, findings, kind);
  };
  const { denyList, pii, promptInjection, maxOutputChars } = guardrails;
  if (denyList && denyList.on.includes(where)) apply('denyList', denyList.action, 'deny_list', detectTerms(current, denyList.terms));
  if (pii && pii.on.includes(where)) {
    for (const kind of pii.kinds) apply('pii', pii.action, kind, PII_DETECTORS[kind](current));
  }
  if (promptInjection && where === 'input' && source.startsWith('tool:')) apply('promptInjection', promptInjection.action, 'injection', detectInjection(current));
  if (maxOutputChars && where === 'output' && current.length > maxOutputChars.chars) {
    hits.push({ rule: 'maxOutputChars', action: maxOutputChars.action, where, kind: 'size', count: current.length, source });
    if (maxOutputChars.action === 'redact') current = `${current.slice(0, maxOutputChars.chars)}\n[output cut at ${maxOutputChars.chars} characters by a guardrail]`;
  }
  const blocked = hits.find((hit) => hit.action === 'block');
  return { text: current, hits, ...(blocked ? { blocked } : {}) };
}

/** Whether the guardrails check the model's answers (then its text is streamed only once checked). */
export function checksOutput(guardrails: Guardrails | undefined): boolean {
  if (!guardrails) return false;
  return Boolean(guardrails.maxOutputChars || guardrails.pii?.on.includes('output') || guardrails.denyList?.on.includes('output'));
}
