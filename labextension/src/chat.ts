/**
 * The docked agent chat (right sidebar): pick an agent of the current connection, ask, and
 * watch the same step-by-step stream as `%agent`'s panel: each tool with its input, the
 * observation, then the answer and a status line with the time taken. Stop cancels the run
 * (the request is aborted; the server closes the agent's stream), Start over forgets the
 * conversation. The answer and any tool's SQL can be inserted into the notebook as cells.
 *
 * The conversation is kept per connection and agent in the browser's localStorage, so it
 * survives a reload, and earlier question/answer pairs go with each follow-up question as
 * the contract's `messages`.
 *
 * The answer is Markdown, rendered by JupyterLab's own Markdown renderer as an untrusted
 * output (sanitized: no script, no raw HTML handlers), as `%agent`'s panel renders it in the
 * notebook. It grows as the model writes: a streaming model's tokens come as partial
 * `output` chunks and the rendered Markdown is redrawn with each. Stop keeps what arrived. A
 * server's progress notes (MindsDB's "Generating Data Catalog...", kind
 * `context`) show as grey lines before the answer, as they arrive.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { IRenderMime, IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { Chunk, KbsqlModel } from './model';
import { renderObservation } from './observation';
import { el, insertCell } from './sidebar';

const CHAT_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<path class="jp-icon3" fill="#616161" d="M4 4h16a2 2 0 0 1 2 2v9a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm3 6a1.5 1.5 0 1 0 0 .01zm5 0a1.5 1.5 0 1 0 0 .01zm5 0a1.5 1.5 0 1 0 0 .01z"/></svg>`;

export const chatIcon = new LabIcon({ name: 'kbsql-labextension:chat', svgstr: CHAT_SVG });

const STORE = 'kbsql-labextension:chat';
const SQL_START = /^\s*(SELECT|WITH|SHOW|DESCRIBE)\b/i;
/** A server's progress notes besides the contract's chunk kinds (kbsql.interface.stream). */
const NOTE_KINDS = ['context', 'status', 'sql'];

/** A duration as the notebook writes it: `180 ms` under a second, `2.4 s`, `12 s`, `3 min 05 s`. */
export function duration(seconds: number): string {
  const s = Math.max(0, seconds);
  if (s < 1) {
    return s < 0.0005 ? '<1 ms' : s < 0.9995 ? `${Math.round(s * 1000)} ms` : '1.0 s';
  }
  if (s < 60) {
    return s >= 10 ? `${Math.round(s)} s` : `${s.toFixed(1)} s`;
  }
  const whole = Math.floor(s);
  return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, '0')} s`;
}

interface IStep {
  tool: string;
  input: string;
  observation?: string;
}

interface ITurn {
  question: string;
  notes?: string[];
  steps: IStep[];
  answer: string;
  state: 'running' | 'done' | 'stopped' | 'error';
  error?: string;
  seconds?: number;
}

export class KbsqlChat extends Widget {
  private agentSelect = el('select', 'jp-mod-styled kbsql-Chat-agent');
  private log = el('div', 'kbsql-Chat-log');
  private question = el('textarea', 'jp-mod-styled kbsql-Chat-question');
  private askButton = el('button', 'jp-mod-styled jp-mod-accept kbsql-Chat-ask', 'Ask');
  private stopButton = el('button', 'jp-mod-styled kbsql-Chat-stop', 'Stop');
  private resetButton = el('button', 'jp-mod-styled kbsql-Chat-reset', 'Start over');
  private note = el('div', 'kbsql-Chat-note');
  private turns: ITurn[] = [];
  private running: AbortController | null = null;
  /** The Markdown renderer showing each turn's answer (disposed when the turn is drawn again). */
  private rendered = new WeakMap<ITurn, IRenderMime.IRenderer>();

  constructor(
    private app: JupyterFrontEnd,
    private model: KbsqlModel,
    private rendermime: IRenderMimeRegistry | null = null
  ) {
    super();
    this.id = 'kbsql-chat';
    this.addClass('kbsql-Chat');
    this.title.icon = chatIcon;
    this.title.caption = 'kbsql: ask an agent';

    const header = el('div', 'kbsql-Chat-header');
    this.agentSelect.setAttribute('aria-label', 'Agent');
    this.agentSelect.addEventListener('change', () => {
      this.agentSelect.title = this.agentSelect.value;
      this.load();
    });
    this.resetButton.type = 'button';
    this.resetButton.addEventListener('click', () => this.startOver());
    header.append(this.agentSelect, this.resetButton);

    this.log.setAttribute('role', 'log');
    this.log.setAttribute('aria-live', 'polite');

    const form = el('form', 'kbsql-Chat-form');
    this.question.rows = 3;
    this.question.placeholder = 'Ask the agent… (Enter sends, Shift+Enter: new line)';
    this.question.setAttribute('aria-label', 'Question');
    this.question.addEventListener('keydown', event => {
      if (event.key === 'Enter' && !event.shiftKey) {
        event.preventDefault();
        void this.ask();
      }
    });
    this.askButton.type = 'submit';
    this.stopButton.type = 'button';
    this.stopButton.disabled = true;
    this.stopButton.addEventListener('click', () => this.stop());
    const buttons = el('div', 'kbsql-Chat-buttons');
    buttons.append(this.askButton, this.stopButton);
    form.append(this.question, buttons);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this.ask();
    });

    this.node.append(header, this.note, this.log, form);
    model.changed.connect(this.renderAgents, this);
    this.renderAgents();
  }

  /** `project.agent` of the selected agent, or '' when there is none. */
  get agent(): string {
    return this.agentSelect.value;
  }

  private storageKey(agent = this.agent): string {
    return `${STORE}:${this.model.connectionKey}:${agent}`;
  }

  private renderAgents(): void {
    const { catalog, loading, error } = this.model;
    if (loading) {
      return;
    }
    const previous = this.agent || window.localStorage.getItem(`${STORE}:${this.model.connectionKey}`) || '';
    const projects = catalog?.projects ?? [];
    const names = projects.flatMap(p => p.agents.map(a => `${p.name}.${a.name}`));
    // One project with agents: the agents' own names (the project says nothing, and the
    // picker is narrow at the panel's default width); the value is always project.agent.
    const oneProject = projects.filter(p => p.agents.length).length <= 1;
    this.agentSelect.replaceChildren(
      ...names.map(name => {
        const option = el('option', '', oneProject ? name.slice(name.indexOf('.') + 1) : name);
        option.value = name;
        option.title = name;
        return option;
      })
    );
    if (names.includes(previous)) {
      this.agentSelect.value = previous;
    }
    this.agentSelect.title = this.agentSelect.value;
    this.note.textContent = error ? error : names.length ? '' : 'No agents on this connection';
    this.note.dataset.state = error ? 'error' : 'ok';
    this.askButton.disabled = !names.length || this.running !== null;
    if (!this.running) {
      this.load();
    }
  }

  /** Show the stored conversation of the selected agent. */
  private load(): void {
    if (this.running) {
      this.stop();
    }
    window.localStorage.setItem(`${STORE}:${this.model.connectionKey}`, this.agent);
    let turns: ITurn[] = [];
    try {
      turns = JSON.parse(window.localStorage.getItem(this.storageKey()) ?? '[]');
    } catch {
      turns = [];
    }
    // A turn still running when the page went away did not finish.
    this.turns = turns.map(t => (t.state === 'running' ? { ...t, state: 'stopped' } : t));
    this.log.replaceChildren(...this.turns.map(t => this.renderTurn(t)));
  }

  private save(): void {
    if (this.agent) {
      window.localStorage.setItem(this.storageKey(), JSON.stringify(this.turns));
    }
  }

  startOver(): void {
    this.stop();
    this.turns = [];
    window.localStorage.removeItem(this.storageKey());
    this.log.replaceChildren();
    this.question.focus();
  }

  stop(): void {
    this.running?.abort();
  }

  async ask(): Promise<void> {
    const question = this.question.value.trim();
    const agent = this.agent;
    if (!question || !agent || this.running) {
      return;
    }
    const dot = agent.indexOf('.');
    const project = agent.slice(0, dot);
    const name = agent.slice(dot + 1);
    const history = this.turns
      .filter(t => t.state === 'done')
      .map(t => ({ question: t.question, answer: t.answer }));
    const turn: ITurn = { question, steps: [], answer: '', state: 'running' };
    this.turns.push(turn);
    this.question.value = '';
    let node = this.renderTurn(turn);
    this.log.append(node);
    const update = () => {
      const fresh = this.renderTurn(turn);
      node.replaceWith(fresh);
      node = fresh;
      this.log.scrollTop = this.log.scrollHeight;
    };
    const controller = new AbortController();
    this.running = controller;
    this.setRunning(true);
    const started = performance.now();
    try {
      await this.model.stream(
        project,
        name,
        question,
        history,
        chunk => {
          apply(turn, chunk);
          turn.seconds = (performance.now() - started) / 1000;
          update();
        },
        controller.signal
      );
      if (turn.state === 'running') {
        turn.state = turn.answer ? 'done' : 'error';
        turn.error = turn.answer ? undefined : 'The stream ended without an answer';
      }
    } catch (error) {
      if (controller.signal.aborted) {
        turn.state = 'stopped';
      } else {
        turn.state = 'error';
        turn.error = (error as Error).message;
      }
    } finally {
      turn.seconds = (performance.now() - started) / 1000;
      this.running = null;
      this.setRunning(false);
      update();
      this.save();
    }
  }

  private setRunning(running: boolean): void {
    this.askButton.disabled = running || !this.agent;
    this.stopButton.disabled = !running;
    this.node.dataset.running = String(running);
  }

  private renderTurn(turn: ITurn): HTMLElement {
    const box = el('div', 'kbsql-Chat-turn');
    box.dataset.state = turn.state;
    box.append(el('div', 'kbsql-Chat-you', turn.question));
    if (turn.notes?.length) {
      const notes = el('ul', 'kbsql-Chat-notes');
      for (const note of turn.notes) {
        const line = el('li', 'kbsql-Chat-note', note.split(/\s+/).join(' '));
        line.title = note;
        notes.append(line);
      }
      box.append(notes);
    }
    const steps = el('ol', 'kbsql-Chat-steps');
    for (const step of turn.steps) {
      const li = el('li', 'kbsql-Chat-step');
      const head = el('div', 'kbsql-Chat-stepHead');
      head.append(el('span', 'kbsql-Chat-tool', step.tool));
      if (SQL_START.test(step.input)) {
        head.append(this.insertButton('Insert SQL as cell', { sql: step.input.trim() }));
      }
      li.append(head);
      if (step.input) {
        li.append(el('pre', 'kbsql-Chat-input', step.input));
      }
      if (step.observation !== undefined) {
        const details = el('details', 'kbsql-Chat-observation');
        details.append(el('summary', '', 'observation'), ...renderObservation(step.observation));
        li.append(details);
      }
      steps.append(li);
    }
    if (turn.steps.length) {
      box.append(steps);
    }
    if (turn.answer) {
      const answer = el('div', 'kbsql-Chat-answer');
      answer.append(this.renderAnswer(turn));
      if (turn.state !== 'running') {
        answer.append(this.insertButton('Insert answer as cell', { markdown: turn.answer }));
      }
      box.append(answer);
    }
    const seconds = turn.seconds === undefined ? '' : ` · ${duration(turn.seconds)}`;
    const label = turn.state === 'error' ? `error: ${turn.error ?? ''}` : turn.state;
    const status = el('div', 'kbsql-Chat-status', `${label}${seconds}`);
    status.dataset.state = turn.state;
    box.append(status);
    return box;
  }

  /**
   * The answer as Markdown, rendered by JupyterLab's renderer (untrusted: sanitized), the
   * way the notebook's panel shows it; `data-rendered` is set once it is drawn. Without a
   * renderer (the rendermime plugin disabled) the text as it came.
   */
  private renderAnswer(turn: ITurn): HTMLElement {
    const host = el('div', 'kbsql-Chat-answerText');
    this.rendered.get(turn)?.dispose();
    this.rendered.delete(turn);
    if (!this.rendermime) {
      host.textContent = turn.answer;
      host.dataset.rendered = 'text';
      return host;
    }
    const renderer = this.rendermime.createRenderer('text/markdown');
    this.rendered.set(turn, renderer);
    host.textContent = turn.answer; // shown at once while the Markdown renders: no blank flash as it grows
    renderer
      .renderModel(new MimeModel({ data: { 'text/markdown': turn.answer }, trusted: false }))
      .then(() => {
        if (!renderer.isDisposed) {
          host.replaceChildren(renderer.node);
          host.dataset.rendered = 'markdown';
        }
      })
      .catch(() => {
        host.textContent = turn.answer;
        host.dataset.rendered = 'text';
      });
    return host;
  }

  private insertButton(label: string, args: { sql?: string; markdown?: string }): HTMLButtonElement {
    const button = el('button', 'jp-mod-styled kbsql-Chat-insert', label);
    button.type = 'button';
    button.addEventListener('click', () => {
      if (!insertCell(this.app, args)) {
        this.note.textContent = 'Open a notebook to insert a cell';
        this.note.dataset.state = 'error';
      }
    });
    return button;
  }
}

/** Apply one stream chunk to a turn (the contract's chunk kinds, as `%agent` reads them). */
function apply(turn: ITurn, chunk: Chunk): void {
  if (NOTE_KINDS.includes(chunk.type)) {
    const note = String(chunk.content ?? '').trim();
    if (note) {
      turn.notes = [...(turn.notes ?? []), note];
    }
  } else if (chunk.type === 'error') {
    turn.state = 'error';
    turn.error = String(chunk.content ?? 'the agent failed');
  } else if (chunk.type === 'end') {
    if (turn.state === 'running') {
      turn.state = 'done';
    }
  } else if (Array.isArray(chunk.actions)) {
    turn.answer = ''; // words streamed before a tool call were the model thinking aloud
    for (const action of chunk.actions) {
      turn.steps.push({ tool: String(action.tool ?? ''), input: String(action.tool_input ?? '') });
    }
  } else if (Array.isArray(chunk.steps)) {
    for (const step of chunk.steps) {
      const tool = String(step.action?.tool ?? '');
      const open = turn.steps.find(s => s.observation === undefined && s.tool === tool);
      if (open) {
        open.observation = String(step.observation ?? '');
      } else {
        turn.steps.push({
          tool,
          input: String(step.action?.tool_input ?? ''),
          observation: String(step.observation ?? '')
        });
      }
    }
  } else if (typeof chunk.output === 'string') {
    turn.answer += chunk.output; // partial: a streaming model's tokens, the answer their concatenation
  }
}
