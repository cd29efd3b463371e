/**
 * A CodeMirror 6 language for notebook cells that use kbsql magics.
 *
 * Why a language and not decorations: JupyterLab highlights a cell from its syntax tree,
 * so the cleanest way to colour SQL is to hand CodeMirror a tree in which the SQL parts
 * are parsed by the real SQL parser (CodeMirror's MySQL dialect, the closest to the MindsDB
 * dialect, plus the MindsDB statement words) and the rest by JupyterLab's Python parser. A tiny outer parser cuts the
 * cell into segments (see magics.ts) and `parseMixed` mounts the two parsers on them:
 * SQL on each SQL segment, Python as one overlay over all Python segments so that Python
 * sees a contiguous program. Highlighting, bracket matching, comment toggling and
 * completion then follow the language under the cursor, with JupyterLab's own theme.
 */
import { defineLanguageFacet, Language, languageDataProp } from '@codemirror/language';
import { MySQL, SQLDialect } from '@codemirror/lang-sql';
import { Compartment, EditorState, Extension, Prec } from '@codemirror/state';
import {
  Input,
  NodeSet,
  NodeType,
  parseMixed,
  ParseWrapper,
  Parser,
  PartialParse,
  Tree,
  TreeFragment
} from '@lezer/common';
import { styleTags, tags as t } from '@lezer/highlight';

import { detectMode, ISegment, scan } from './magics';

/**
 * Words of the MindsDB dialect that MySQL lacks (CREATE KNOWLEDGE_BASE, SHOW AGENTS, ...),
 * highlighted as keywords like the rest of the statement.
 */
const MINDSDB_KEYWORDS =
  'knowledge_base knowledge_bases agent agents project projects model models ml_engine ' +
  'ml_engines skill skills predictor predictors job jobs chatbot chatbots trigger triggers ' +
  'evaluate retrain finetune parameters integration integrations';

/**
 * The SQL of %kbsql: MySQL plus the MindsDB words, and `:name` as a variable (the magic
 * binds `:name` to a Python variable as a quoted literal).
 */
export const kbsqlDialect = SQLDialect.define({
  ...MySQL.spec,
  keywords: `${MySQL.spec.keywords ?? ''} ${MINDSDB_KEYWORDS}`,
  specialVar: `:${MySQL.spec.specialVar ?? '@?'}`
});

const data = defineLanguageFacet({ commentTokens: { line: '#' } });

const NAMES = ['Document', 'Cell', 'Magic', 'MagicArgs', 'Sql', 'Python'];
const nodeSet = new NodeSet(
  NAMES.map((name, id) =>
    NodeType.define({
      id,
      name: `Kbsql${name}`,
      top: id === 0,
      props: id === 0 ? [[languageDataProp, data]] : []
    })
  )
).extend(styleTags({ KbsqlMagic: t.meta, KbsqlMagicArgs: t.meta }));
const [DOCUMENT, CELL, MAGIC, ARGS, SQL, PYTHON] = nodeSet.types;
const KIND_TYPE: Record<ISegment['kind'], NodeType> = {
  magic: MAGIC,
  args: ARGS,
  sql: SQL,
  python: PYTHON
};

/** Build the outline tree of `text`: Document > Cell > one leaf per segment. */
function outline(text: string): Tree {
  const segments = scan(text);
  const children = segments.map(s => new Tree(KIND_TYPE[s.kind], [], [], s.to - s.from));
  const cell = new Tree(CELL, children, segments.map(s => s.from), text.length);
  return new Tree(DOCUMENT, [cell], [0], text.length);
}

/** Parses the whole text in one step: cells are small, and the outline is cheap. */
class OutlineParse implements PartialParse {
  parsedPos = 0;
  stoppedAt: number | null = null;

  constructor(
    private input: Input,
    private end: number
  ) {}

  advance(): Tree {
    this.parsedPos = this.end;
    return outline(this.input.read(0, this.end));
  }

  stopAt(pos: number): void {
    this.stoppedAt = pos;
  }
}

/**
 * The outer parser, wrapped by parseMixed. The nested SQL/Python parsers keep their
 * own incremental state (fragments) through the wrapper, so re-parsing the outline on
 * every edit costs one regex pass over the cell.
 */
class OutlineParser extends Parser {
  constructor(private wrapper: ParseWrapper) {
    super();
  }

  createParse(
    input: Input,
    fragments: readonly TreeFragment[],
    ranges: readonly { from: number; to: number }[]
  ): PartialParse {
    const end = ranges.length ? ranges[ranges.length - 1].to : input.length;
    return this.wrapper(new OutlineParse(input, end), input, fragments, ranges);
  }
}

/**
 * The kbsql cell language. Python is the parser JupyterLab already loaded for code cells,
 * so Python in a magic cell looks exactly like Python elsewhere.
 */
export function kbsqlLanguage(pythonParser: Parser): Language {
  const sqlParser = kbsqlDialect.language.parser;
  const parser = new OutlineParser(
    parseMixed(node => {
      if (node.type === SQL) {
        return { parser: sqlParser };
      }
      if (node.type === CELL && node.node.getChild(PYTHON.name)) {
        return { parser: pythonParser, overlay: child => child.type === PYTHON };
      }
      return null;
    })
  );
  return new Language(data, parser, [], 'kbsql');
}

/**
 * The per-editor extension: the kbsql language switched on while the cell uses a kbsql
 * magic and off otherwise (the editor then falls back to JupyterLab's own language).
 *
 * The switch rides on the transaction that changes the text (a transaction extender),
 * so the colours change on the keystroke that completes `%%kbsql`, with no extra
 * dispatch and no flicker. Prec.highest makes this language win over the cell's
 * mimetype language, which JupyterLab sets in its own compartment.
 */
export function kbsqlEditorExtension(
  language: Language,
  initialText: string,
  applies: () => boolean
): Extension {
  const compartment = new Compartment();
  const active = Prec.highest(language.extension);
  const wanted = (text: string) => applies() && detectMode(text) !== 'none';
  return [
    compartment.of(wanted(initialText) ? active : []),
    EditorState.transactionExtender.of(tr => {
      if (!tr.docChanged) {
        return null;
      }
      const want = wanted(tr.newDoc.toString());
      const have = compartment.get(tr.startState) === active;
      return want === have ? null : { effects: compartment.reconfigure(want ? active : []) };
    })
  ];
}
