/**
 * An agent step's observation, shown as the `%agent` panel shows it: a tool that returned rows
 * writes `Output columns: 'a', 'b'`, optional note lines, then CSV with a header (the format of
 * kbsql.interface.observation, whose parser this mirrors line for line); the chat shows that as
 * a table, with the metadata column's internal keys hidden and the scores rounded to 4 decimals
 * (kbsql.notebook.table_view's rules). Anything else (free text, JSON, CSV that does not parse)
 * is shown verbatim. The chat showed the raw CSV: a `metadata` cell of
 * `{"product": "pump", "chunk_index": 0, "start_char": 0, ...}` and `0.638167250767744` on
 * every row.
 */

import { el } from './sidebar';

const PREFIX = 'Output columns:';
const MAX_NOTE_LINES = 5;
const MAX_ROWS = 20;
const MAX_CELL_CHARS = 300;
/** kbsql.interface.results.KB_INTERNAL_METADATA: the contract's bookkeeping keys. */
const INTERNAL_METADATA = new Set([
  'chunk_index',
  'content_column',
  'start_char',
  'end_char',
  'original_doc_id',
  'original_row_index',
  'source'
]);
const SCORE_COLUMNS = new Set(['relevance', 'distance']);

export interface IObservedTable {
  columns: string[];
  rows: string[][];
  note: string;
}

/** RFC 4180 records (quoted fields may hold commas, quotes doubled, line breaks); null when a
 * quote is never closed. */
function parseCsv(text: string): string[][] | null {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c === '"') {
      quoted = true;
    } else if (c === ',') {
      record.push(field);
      field = '';
    } else if (c === '\n') {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
    } else if (c !== '\r') {
      field += c;
    }
  }
  if (quoted) {
    return null;
  }
  record.push(field);
  records.push(record);
  return records;
}

function fields(line: string): string[] {
  return (parseCsv(line)?.[0] ?? []).map(f => f.trim());
}

const same = (a: string[], b: string[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/** The table in an observation, or null for anything else (shown verbatim). */
export function parseObservation(text: string | undefined): IObservedTable | null {
  const trimmed = (text ?? '').trimStart();
  if (!trimmed.startsWith(PREFIX)) {
    return null;
  }
  const cut = trimmed.indexOf('\n');
  const first = cut < 0 ? trimmed : trimmed.slice(0, cut);
  const rest = cut < 0 ? '' : trimmed.slice(cut + 1);
  const declared = first
    .slice(PREFIX.length)
    .split(',')
    .filter(c => c.trim())
    .map(c => c.trim().replace(/^['"]+|['"]+$/g, ''));
  let lines = rest.split('\n');
  let note: string[] = [];
  while (lines.length && declared.length && !same(fields(lines[0]), declared) && note.length < MAX_NOTE_LINES) {
    note.push(lines.shift() as string);
  }
  if (!lines.length || (declared.length && !same(fields(lines[0]), declared))) {
    lines = rest.split('\n');
    note = [];
  }
  while (lines.length && !lines[lines.length - 1].trim()) {
    lines.pop();
  }
  while (lines.length && !lines[0].trim()) {
    lines.shift();
  }
  if (!lines.length) {
    return { columns: [], rows: [], note: note.join('\n') };
  }
  const parsed = parseCsv(lines.join('\n'));
  if (!parsed) {
    return null;
  }
  const [header, ...rows] = parsed;
  if (rows.some(r => r.length > header.length)) {
    return null;
  }
  return {
    columns: header,
    rows: rows.map(r => [...r, ...Array(header.length - r.length).fill('')]),
    note: note.join('\n')
  };
}

/** A metadata cell without its internal keys, as the `%agent` panel shows it (Python's
 * json.dumps: `{"a": 1, "b": 1.0}`). Its members are cut from the text, not parsed and written
 * again: JSON.parse reads a number past 2^53 rounded, so an id 12345678901234567890 showed as
 * 12345678901234567000 (and 1.0 as 1); strings are written again so `\u00e9` reads é. */
function publicJson(text: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return text;
  }
  const kept = members(text.trim()).filter(([k]) => !INTERNAL_METADATA.has(k) && !k.startsWith('_'));
  return `{${kept.map(([k, raw]) => `${JSON.stringify(k)}: ${unescaped(raw)}`).join(', ')}}`;
}

const JSON_STRINGS = /"(?:[^"\\]|\\.)*"/g;
const JSON_STRING_AT = /"(?:[^"\\]|\\.)*"/y;

/** The [key, value as written] members of a JSON object's text (one JSON.parse has read). */
function members(text: string): [string, string][] {
  const found: [string, string][] = [];
  let depth = 0;
  let key = '';
  let start = -1; // where the value after `key:` begins; -1 before the colon
  for (let i = 1; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      JSON_STRING_AT.lastIndex = i;
      const token = JSON_STRING_AT.exec(text)?.[0] ?? '""';
      if (depth === 0 && start < 0) {
        key = JSON.parse(token) as string;
      }
      i += token.length - 1;
    } else if (c === '{' || c === '[') {
      depth++;
    } else if ((c === '}' || c === ']') && depth > 0) {
      depth--;
    } else if (depth === 0 && c === ':' && start < 0) {
      start = i + 1;
    } else if (depth === 0 && (c === ',' || c === '}')) {
      if (start >= 0) {
        found.push([key, text.slice(start, i).trim()]);
      }
      start = -1;
    }
  }
  return found;
}

/** A value's text with each string written again (`\u00e9` as é, what must stay escaped kept). */
function unescaped(raw: string): string {
  return raw.replace(JSON_STRINGS, token => JSON.stringify(JSON.parse(token)));
}

function rounded(text: string): string {
  const value = Number(text);
  return text.trim() && Number.isFinite(value) ? value.toFixed(4) : text;
}

/** The cells as shown: metadata without internal keys, scores to 4 decimals. */
export function displayCells(columns: string[], rows: string[][]): string[][] {
  return rows.map(row =>
    row.map((cell, i) =>
      columns[i] === 'metadata' ? publicJson(cell) : SCORE_COLUMNS.has(columns[i]) ? rounded(cell) : cell
    )
  );
}

function tableOf(columns: string[], rows: string[][]): HTMLElement {
  const table = el('table', 'kbsql-Chat-table');
  const head = el('tr');
  head.append(...columns.map(c => el('th', '', c)));
  table.append(el('thead'), el('tbody'));
  table.tHead?.append(head);
  for (const row of rows) {
    const tr = el('tr');
    for (const cell of row) {
      const td = el('td', '', cell.length > MAX_CELL_CHARS ? `${cell.slice(0, MAX_CELL_CHARS)}…` : cell);
      td.title = cell.length > MAX_CELL_CHARS ? cell : '';
      tr.append(td);
    }
    table.tBodies[0].append(tr);
  }
  return table;
}

/** The observation's body: its note lines and a table, or the text verbatim. */
export function renderObservation(text: string): HTMLElement[] {
  const table = parseObservation(text);
  if (!table || !table.columns.length) {
    return [el('pre', '', text)];
  }
  const shown: HTMLElement[] = table.note ? [el('pre', '', table.note)] : [];
  const cells = displayCells(table.columns, table.rows);
  const n = cells.length;
  const count = `${n} row${n === 1 ? '' : 's'}`;
  const box = el('div', 'kbsql-Chat-tableBox');
  box.append(tableOf(table.columns, cells.slice(0, MAX_ROWS)));
  shown.push(box);
  if (n <= MAX_ROWS) {
    shown.push(el('div', 'kbsql-Chat-rowcount', count));
  } else {
    // The first rows at a glance, every row one click away (never a quiet cut).
    const all = el('details', 'kbsql-Chat-allRows');
    const whole = el('div', 'kbsql-Chat-tableBox');
    whole.append(tableOf(table.columns, cells));
    all.append(el('summary', 'kbsql-Chat-rowcount', `${count} (showing ${MAX_ROWS}; expand for all)`), whole);
    shown.push(all);
  }
  return shown;
}
