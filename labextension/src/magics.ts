/**
 * Where the kbsql magics are in a cell's text.
 *
 * Pure string scanning, kept apart from CodeMirror so the rules that decide what is SQL
 * mirror the IPython magic (src/kbsql/notebook/magics.py) in one readable place:
 *
 *   %%kbsql [options] [NAME <<]      first line of the cell; the rest of the cell is SQL
 *   [x = ]%kbsql [options] SQL       one line; everything after the options is SQL
 */

/** One run of text and what it is. Runs never overlap and come in document order. */
export interface ISegment {
  kind: 'magic' | 'args' | 'sql' | 'python';
  from: number;
  to: number;
}

/** How a cell uses kbsql: not at all, as a cell magic, or through line magics in Python. */
export type KbsqlMode = 'none' | 'cell' | 'line';

/** Options of %kbsql that take a value (see the magic's @argument list). */
const VALUE_OPTION = String.raw`(?:-[ocpl]|--out|--connection|--project|--limit)(?:[ \t]+|=)\S+`;
/** Options (and the `NAME <<` capture) that precede the SQL on the magic's own line. */
const OPTIONS = new RegExp(
  String.raw`^(?:[ \t]+(?:${VALUE_OPTION}|--no-vars))*(?:[ \t]+[A-Za-z_]\w*[ \t]*<<)?`
);
/** `%%kbsql` alone or followed by whitespace: `%%kbsql_connect` is another magic. */
const CELL_MAGIC = /^(\s*)(%%kbsql)(?=\s|$)/;
/** A `%kbsql` line magic, optionally assigned (`rows = %kbsql ...`). */
const LINE_MAGIC = /^([ \t]*(?:[A-Za-z_][\w.]*[ \t]*=[ \t]*)?)(%kbsql)(?=[ \t]|$)(.*)$/gm;

/** Cheap test used on every edit: does this text need the kbsql language at all? */
export function detectMode(text: string): KbsqlMode {
  if (CELL_MAGIC.test(text)) {
    return 'cell';
  }
  LINE_MAGIC.lastIndex = 0;
  return LINE_MAGIC.test(text) ? 'line' : 'none';
}

/** Split the options from the SQL in the text that follows the magic on its line. */
function splitArgs(rest: string, offset: number, out: ISegment[]): void {
  const options = OPTIONS.exec(rest);
  const argsEnd = options ? options[0].length : 0;
  if (argsEnd > 0) {
    out.push({ kind: 'args', from: offset, to: offset + argsEnd });
  }
  const sqlStart = offset + argsEnd + (rest.slice(argsEnd).length - rest.slice(argsEnd).trimStart().length);
  if (sqlStart < offset + rest.length) {
    out.push({ kind: 'sql', from: sqlStart, to: offset + rest.length });
  }
}

/** The segments of a cell; an empty list when the cell has no kbsql magic. */
export function scan(text: string): ISegment[] {
  const out: ISegment[] = [];
  const cell = CELL_MAGIC.exec(text);
  if (cell) {
    const magicFrom = cell[1].length;
    const magicTo = magicFrom + cell[2].length;
    out.push({ kind: 'magic', from: magicFrom, to: magicTo });
    const eol = text.indexOf('\n', magicTo);
    const headerEnd = eol < 0 ? text.length : eol;
    const args = text.slice(magicTo, headerEnd);
    if (args.trim()) {
      out.push({ kind: 'args', from: magicTo, to: headerEnd });
    }
    if (eol >= 0 && eol + 1 < text.length) {
      out.push({ kind: 'sql', from: eol + 1, to: text.length });
    }
    return out;
  }
  let pythonFrom = 0;
  LINE_MAGIC.lastIndex = 0;
  for (let m = LINE_MAGIC.exec(text); m; m = LINE_MAGIC.exec(text)) {
    const magicFrom = m.index + m[1].length;
    const magicTo = magicFrom + m[2].length;
    if (magicFrom > pythonFrom) {
      out.push({ kind: 'python', from: pythonFrom, to: magicFrom });
    }
    out.push({ kind: 'magic', from: magicFrom, to: magicTo });
    splitArgs(m[3], magicTo, out);
    pythonFrom = magicTo + m[3].length;
    if (m[0].length === 0) {
      LINE_MAGIC.lastIndex++; // never loop on an empty match
    }
  }
  if (out.length && pythonFrom < text.length) {
    out.push({ kind: 'python', from: pythonFrom, to: text.length });
  }
  return out;
}
