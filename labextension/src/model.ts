/**
 * The connection shared by the sidebar and the chat: which kbsql service the current
 * notebook uses, its catalog, and the requests to the Jupyter server's `/kbsql/*` routes.
 *
 * The page never talks to a kbsql server itself (a kbsql server sends no CORS headers, and
 * the default embedded engine is files, not a URL): the Jupyter server extension opens the
 * service for it (see kbsql_labextension/connection.py). Every request is a POST with a JSON
 * body carrying the settings' URL and token, the current notebook's path and its kernel's
 * connection, so the token never appears in a URL (access logs) and is never put in the DOM
 * or the console.
 *
 * The notebook's connection: with no server URL in the settings, the kernel is asked
 * silently (an `execute_request` with `silent`, no history, and one `user_expressions`
 * entry calling `kbsql.notebook.location.for_frontend()`) when the notebook becomes current,
 * when its kernel starts or restarts, and after a cell that may switch it (`%kbsql_connect`,
 * a writing `%%kbsql`). The answer is a data directory or a URL, never a key. A kernel busy
 * with a long cell is not waited for: the last answer for that notebook is used meanwhile.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { Token } from '@lumino/coreutils';
import { ISignal, Signal } from '@lumino/signaling';

export interface IKnowledgeBase {
  name: string;
  content_columns: string[];
  metadata_columns: string[];
  id_column: string;
  embedding_model: string | null;
  reranking_model: string | null;
  rows: number | null;
  chunks: number | null;
  count_error?: string;
}

export interface IAgent {
  name: string;
  model: string | null;
  knowledge_bases: string[];
  tables: string[];
}

/** A job (CREATE JOB) with its schedule and last run (`log.jobs_history`); times in UTC. */
export interface IJob {
  name: string;
  schedule: string | null;
  next_run_at: string | null;
  last_run: string | null;
  last_run_end: string | null;
  last_error: string | null;
}

export interface ICatalog {
  connection: { kind: 'embedded' | 'remote'; where: string; source: string; token: boolean };
  exists: boolean;
  projects: { name: string; knowledge_bases: IKnowledgeBase[]; agents: IAgent[]; jobs?: IJob[] }[];
  datasources: { name: string; tables: string[]; error?: string }[];
}

export interface ISearchAnswer {
  sql: string;
  hits: { id: string | null; chunk_id: string | null; content: string | null; relevance: number | null }[];
}

/** The notebook kernel's current kbsql connection (kbsql.notebook.location). */
export interface IKernelPlace {
  kind: 'embedded' | 'remote';
  location: string;
  alias: string;
  project: string | null;
  key: boolean;
}

/** The silent question put to a Python kernel; its text/plain answer is JSON. */
const LOCATION_EXPRESSION = "__import__('kbsql.notebook.location', fromlist=['_']).for_frontend()";
/** How long a refresh waits for the kernel (a busy kernel answers after its cell). */
const KERNEL_WAIT_MS = 2500;

/** Ask a kernel for its kbsql connection; null when it has none to tell (not Python, no kbsql). */
export async function askKernel(kernel: Kernel.IKernelConnection): Promise<IKernelPlace | null> {
  const info = await kernel.info;
  if (info.language_info?.name !== 'python') {
    return null;
  }
  const future = kernel.requestExecute(
    {
      code: '',
      silent: true,
      store_history: false,
      user_expressions: { kbsql: LOCATION_EXPRESSION },
      allow_stdin: false,
      stop_on_error: false
    },
    true
  );
  const reply = await future.done;
  const answer = (reply.content as any).user_expressions?.kbsql;
  if (answer?.status !== 'ok') {
    return null; // kbsql is not installed in this kernel: the default applies
  }
  const place = JSON.parse(String(answer.data['text/plain'])).location;
  return place && place.location ? (place as IKernelPlace) : null;
}

const timeout = (ms: number) => new Promise<'timeout'>(resolve => setTimeout(() => resolve('timeout'), ms));

/** One chunk of the contract's agent stream (start, actions, steps, output, error, end). */
export type Chunk = { [key: string]: any };

export const CONNECTION_PLUGIN = 'kbsql-labextension:connection';

/** SQL identifiers as MindsDB quotes them: plain names bare, anything else in backticks. */
export const ident = (name: string): string =>
  /^[A-Za-z_]\w*$/.test(name) ? name : `\`${name.replace(/`/g, '``')}\``;

/** Does this cell change what the sidebar lists (a kbsql statement that writes)? */
export function changesCatalog(source: string): boolean {
  const writes = /\b(CREATE|DROP|ALTER|INSERT|DELETE|UPDATE|USE)\b/i;
  return /%kbsql_connect\b/.test(source) || (/%%?kbsql\b/.test(source) && writes.test(source));
}

export class KbsqlModel {
  private _url = '';
  private _token = '';
  private _catalog: ICatalog | null = null;
  private _error = '';
  private _loading = false;
  private _pending: Promise<void> | null = null;
  private _again = false;
  private _ready = false;
  private _changed = new Signal<this, void>(this);
  /** The kernel connection used by the requests (of the current notebook, when last asked). */
  private _kernel: IKernelPlace | null = null;
  /** The last answer of each notebook's kernel (used while its kernel is busy). */
  private _known = new WeakMap<NotebookPanel, IKernelPlace | null>();
  private _watched = new WeakSet<NotebookPanel>();

  constructor(private tracker: INotebookTracker) {
    tracker.currentChanged.connect((_, panel) => {
      if (panel) {
        this.watch(panel);
      }
      void this.refresh();
    });
    NotebookActions.executed.connect((_, { cell }) => {
      if (cell.model.type === 'code' && changesCatalog(cell.model.sharedModel.getSource())) {
        void this.refresh();
      }
    });
  }

  /** Emitted when the catalog, the error or the loading state changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }
  get catalog(): ICatalog | null {
    return this._catalog;
  }
  get error(): string {
    return this._error;
  }
  get loading(): boolean {
    return this._loading;
  }

  /** A stable key of the current connection (for per-agent chat storage). */
  get connectionKey(): string {
    const c = this._catalog?.connection;
    return c ? `${c.kind}:${c.where}` : '';
  }

  /** Take the server URL and token from the settings (reloads when they change). */
  useSettings(settings: ISettingRegistry.ISettings): void {
    const apply = () => {
      this._url = String(settings.get('serverUrl').composite ?? '').trim();
      this._token = String(settings.get('token').composite ?? '');
      this._ready = true;
      void this.refresh();
    };
    settings.changed.connect(apply);
    apply();
  }

  /** No settings to wait for (no registry, or it failed): use the embedded default. */
  useDefaults(): void {
    this._ready = true;
    void this.refresh();
  }

  /**
   * The body every request starts from: where the service is. `kernel_id` lets the Jupyter
   * server ask that kernel for the credentials of its server connection itself (they never
   * come to the page).
   */
  private target(): {
    url: string;
    token: string;
    notebook: string;
    kernel: IKernelPlace | null;
    kernel_id: string;
  } {
    const panel = this.tracker.currentWidget;
    return {
      url: this._url,
      token: this._token,
      notebook: panel?.context.path ?? '',
      kernel: this._url ? null : this._kernel,
      kernel_id: this._url ? '' : (panel?.sessionContext.session?.kernel?.id ?? '')
    };
  }

  /** Reload when a notebook's kernel starts, changes or restarts (its connection is new). */
  private watch(panel: NotebookPanel): void {
    if (this._watched.has(panel)) {
      return;
    }
    this._watched.add(panel);
    // idle after starting (a new or changed kernel) or restarting: a kernel with a fresh namespace
    let fresh = true;
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'starting' || status === 'restarting' || status === 'autorestarting') {
        fresh = true;
      } else if (status === 'idle' && fresh) {
        fresh = false;
        this._known.delete(panel);
        if (this.tracker.currentWidget === panel) {
          void this.refresh();
        }
      }
    });
  }

  /**
   * The current notebook's kernel connection: asked now, or the last answer if the kernel
   * does not answer quickly (busy, or still starting: it reloads once ready).
   */
  private async kernelPlace(): Promise<IKernelPlace | null> {
    const panel = this.tracker.currentWidget;
    if (this._url || !panel) {
      return null; // a server URL in the settings wins: the kernel is not disturbed
    }
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || !panel.sessionContext.isReady) {
      return this._known.get(panel) ?? null;
    }
    try {
      const answer = await Promise.race([askKernel(kernel), timeout(KERNEL_WAIT_MS)]);
      if (answer === 'timeout') {
        return this._known.get(panel) ?? null;
      }
      this._known.set(panel, answer);
      return answer;
    } catch {
      return this._known.get(panel) ?? null; // a dead or restarting kernel: the default or last answer
    }
  }

  /**
   * Reload the catalog; calls while one load runs coalesce into one more load. Nothing is
   * loaded before the settings are known (a server URL there means the embedded engine must
   * not be opened at all).
   */
  refresh(): Promise<void> {
    if (!this._ready) {
      return Promise.resolve();
    }
    if (this._pending) {
      this._again = true;
      return this._pending;
    }
    this._pending = (async () => {
      do {
        this._again = false;
        this._loading = true;
        this._changed.emit();
        try {
          this._kernel = await this.kernelPlace();
          this._catalog = await this.post<ICatalog>('catalog', {});
          this._error = '';
        } catch (error) {
          this._catalog = null;
          this._error = (error as Error).message;
        }
        this._loading = false;
        this._changed.emit();
      } while (this._again);
      this._pending = null;
    })();
    return this._pending;
  }

  search(project: string, kb: string, text: string): Promise<ISearchAnswer> {
    return this.post<ISearchAnswer>('search', { project, knowledge_base: kb, text });
  }

  /** POST to `/kbsql/<route>`; a failure throws the service's own sentence. */
  async post<T>(route: string, body: object, signal?: AbortSignal): Promise<T> {
    const response = await this.request(route, body, signal);
    const answer = await response.json();
    return answer as T;
  }

  /**
   * Ask an agent; `onChunk` gets each chunk of the stream as it arrives. Aborting `signal`
   * (Stop) closes the connection, and the server cancels the run.
   */
  async stream(
    project: string,
    agent: string,
    question: string,
    history: { question: string; answer: string }[],
    onChunk: (chunk: Chunk) => void,
    signal: AbortSignal
  ): Promise<void> {
    const response = await this.request('agents/stream', { project, agent, question, history }, signal);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) {
          onChunk(JSON.parse(line));
        }
        newline = buffer.indexOf('\n');
      }
    }
  }

  private async request(route: string, body: object, signal?: AbortSignal): Promise<Response> {
    const settings = ServerConnection.makeSettings();
    const endpoint = URLExt.join(settings.baseUrl, 'kbsql', route);
    const init: RequestInit = {
      method: 'POST',
      body: JSON.stringify({ ...this.target(), ...body }),
      headers: { 'Content-Type': 'application/json' },
      signal
    };
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(endpoint, init, settings);
    } catch (error) {
      if ((error as Error).name === 'AbortError' || signal?.aborted) {
        throw error;
      }
      throw new Error('The Jupyter server cannot be reached');
    }
    if (!response.ok) {
      let detail = response.statusText;
      try {
        const problem = await response.json();
        detail = problem.detail ?? problem.message ?? detail;
      } catch {
        // not JSON: keep the status text
      }
      throw new Error(detail);
    }
    return response;
  }
}

/** The shared model, provided by the connection plugin to the sidebar and the chat. */
export const IKbsqlModel = new Token<KbsqlModel>(
  'kbsql-labextension:IKbsqlModel',
  'The kbsql connection, catalog and requests shared by the sidebar and the chat.'
);
