/**
 * The kbsql sidebar: the knowledge bases, agents, data sources and tables of the current
 * notebook's kbsql connection (the server set in the settings, else the one its kernel
 * uses: `%kbsql_connect URL|DIR`, else the embedded engine next to the notebook), a
 * knowledge-base search, and one click from a ready `%%kbsql` cell.
 *
 * It renders the shared model's catalog, which loads when JupyterLab opens, when another
 * notebook becomes current or its kernel (re)starts, and after a `%%kbsql` cell that writes
 * or a `%kbsql_connect` has run.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { LabIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { INSERT_CELL } from './commands';
import { ICatalog, IJob, IKnowledgeBase, ident, KbsqlModel } from './model';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><ellipse cx="12" cy="5" rx="8" ry="3"/>
<path d="M4 7v4c0 1.7 3.6 3 8 3s8-1.3 8-3V7c0 1.7-3.6 3-8 3S4 8.7 4 7z"/>
<path d="M4 13v4c0 1.7 3.6 3 8 3s8-1.3 8-3v-4c0 1.7-3.6 3-8 3s-8-1.3-8-3z"/></g></svg>`;

export const kbsqlIcon = new LabIcon({ name: 'kbsql-labextension:icon', svgstr: ICON_SVG });

/** `document.createElement` with a class and text, to keep the DOM code short. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

/** Insert `sql` as a `%%kbsql` cell in the current notebook; false when none is open. */
export function insertCell(app: JupyterFrontEnd, args: { sql?: string; markdown?: string }): boolean {
  if (!app.commands.isEnabled(INSERT_CELL)) {
    return false;
  }
  void app.commands.execute(INSERT_CELL, args);
  return true;
}

const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

/**
 * A one-line text that may be longer than the panel: cut with an ellipsis (never mid-word
 * on a second line), the whole text on hover.
 */
export function ellipsised<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text: string
): HTMLElementTagNameMap[K] {
  const node = el(tag, `${className} kbsql-ellipsis`, text);
  node.title = text;
  return node;
}

export class KbsqlSidebar extends Widget {
  private connection = el('div', 'kbsql-Sidebar-connection');
  private status = el('div', 'kbsql-Sidebar-status');
  private kbSelect = el('select', 'jp-mod-styled kbsql-Sidebar-kbSelect');
  private searchInput = el('input', 'jp-mod-styled kbsql-Sidebar-searchText');
  private hits = el('div', 'kbsql-Sidebar-hits');
  private list = el('div', 'kbsql-Sidebar-list');
  /** The connection the hits were found on: they go when it changes (another notebook, %kbsql_connect). */
  private shownKey = '';

  constructor(
    private app: JupyterFrontEnd,
    private model: KbsqlModel
  ) {
    super();
    this.id = 'kbsql-sidebar';
    this.addClass('kbsql-Sidebar');
    this.title.icon = kbsqlIcon;
    this.title.caption = 'kbsql: knowledge bases, agents and tables';

    const header = el('div', 'kbsql-Sidebar-header');
    const refresh = el('button', 'jp-mod-styled kbsql-Sidebar-refresh', 'Refresh');
    refresh.type = 'button';
    refresh.addEventListener('click', () => void this.model.refresh());
    header.append(this.connection, refresh);
    this.status.setAttribute('role', 'status');

    const form = el('form', 'kbsql-Sidebar-search');
    form.setAttribute('role', 'search');
    this.kbSelect.setAttribute('aria-label', 'Knowledge base to search');
    this.searchInput.type = 'search';
    this.searchInput.placeholder = 'Search for…';
    this.searchInput.setAttribute('aria-label', 'Search text');
    const go = el('button', 'jp-mod-styled jp-mod-accept kbsql-Sidebar-searchButton', 'Search');
    go.type = 'submit';
    form.append(this.kbSelect, this.searchInput, go);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this.search();
    });

    this.node.append(header, this.status, form, this.hits, this.list);
    model.changed.connect(this.render, this);
    this.render();
  }

  /** Loads on first show if nothing is loaded yet (the model loads at start-up). */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (!this.model.catalog && !this.model.loading) {
      void this.model.refresh();
    }
  }

  private setStatus(text: string, state: 'ok' | 'loading' | 'error'): void {
    this.status.textContent = text;
    this.status.dataset.state = state;
  }

  private render(): void {
    const { catalog, error, loading } = this.model;
    if (loading) {
      this.setStatus('Loading…', 'loading');
      return; // keep the last list on screen while it reloads
    }
    if (error || !catalog) {
      this.setStatus(error || 'Not loaded', 'error');
      this.connection.textContent = '';
      this.list.replaceChildren();
      this.kbSelect.replaceChildren();
      return;
    }
    const c = catalog.connection;
    if (this.model.connectionKey !== this.shownKey) {
      this.shownKey = this.model.connectionKey;
      this.hits.replaceChildren();
      delete this.hits.dataset.state;
    }
    const place = `${c.kind === 'remote' ? 'server' : 'embedded'} ${c.where}`;
    this.connection.textContent = place;
    const from = c.source === 'kernel' ? "the notebook's kernel (%kbsql_connect)" : `the ${c.source}`;
    // the whole place first: the header cuts a long one with an ellipsis
    this.connection.title = `${place}\nkbsql connection of ${from}${c.token ? ' (token set)' : ''}`;
    this.connection.dataset.source = c.source;
    const kbCount = catalog.projects.reduce((n, p) => n + p.knowledge_bases.length, 0);
    const agentCount = catalog.projects.reduce((n, p) => n + p.agents.length, 0);
    this.setStatus(
      catalog.exists
        ? `${plural(kbCount, 'knowledge base')}, ${plural(agentCount, 'agent')}`
        : 'No data directory yet: run a %%kbsql cell to create it',
      'ok'
    );
    this.renderSearchChoices(catalog);
    this.list.replaceChildren(...this.renderProjects(catalog), ...this.renderSources(catalog));
  }

  private renderSearchChoices(catalog: ICatalog): void {
    const previous = this.kbSelect.value;
    const options = catalog.projects.flatMap(p =>
      p.knowledge_bases.map(kb => {
        const option = el('option', '', `${p.name}.${kb.name}`);
        option.value = JSON.stringify([p.name, kb.name]);
        return option;
      })
    );
    this.kbSelect.replaceChildren(...options);
    if (options.some(o => o.value === previous)) {
      this.kbSelect.value = previous;
    }
  }

  private renderProjects(catalog: ICatalog): HTMLElement[] {
    return catalog.projects.map(project => {
      const section = el('section', 'kbsql-Sidebar-project');
      section.dataset.project = project.name;
      section.append(el('h3', '', project.name));
      const p = ident(project.name);
      for (const kb of project.knowledge_bases) {
        const sql = `SELECT * FROM ${p}.${ident(kb.name)} WHERE content = '' LIMIT 10`;
        section.append(this.item('kb', kb.name, counts(kb), sql, kbDetails(kb)));
      }
      for (const agent of project.agents) {
        const sql = `SELECT answer FROM ${p}.${ident(agent.name)} WHERE question = ''`;
        const details: [string, string][] = [
          ['model', agent.model ?? 'default'],
          ['knowledge bases', agent.knowledge_bases.join(', ') || '–'],
          ['tables', agent.tables.join(', ') || '–']
        ];
        section.append(this.item('agent', agent.name, '', sql, details));
      }
      for (const job of project.jobs ?? []) {
        const sql = `SELECT * FROM log.jobs_history WHERE project = '${sqlText(project.name)}' AND name = '${sqlText(job.name)}'`;
        section.append(this.item('job', job.name, lastRun(job), sql, jobDetails(job)));
      }
      if (!project.knowledge_bases.length && !project.agents.length && !project.jobs?.length) {
        section.append(el('div', 'kbsql-Sidebar-empty', 'No knowledge bases or agents'));
      }
      return section;
    });
  }

  private renderSources(catalog: ICatalog): HTMLElement[] {
    if (!catalog.datasources.length) {
      return [];
    }
    const section = el('section', 'kbsql-Sidebar-sources');
    section.append(el('h3', '', 'Data sources'));
    for (const source of catalog.datasources) {
      const group = el('div', 'kbsql-Sidebar-source');
      group.dataset.name = source.name;
      group.append(ellipsised('div', 'kbsql-Sidebar-sourceName', source.name));
      if (source.error) {
        group.append(ellipsised('div', 'kbsql-Sidebar-empty', source.error));
      } else if (!source.tables.length) {
        group.append(el('div', 'kbsql-Sidebar-empty', 'No tables'));
      }
      for (const table of source.tables) {
        const sql = `SELECT * FROM ${ident(source.name)}.${ident(table)} LIMIT 10`;
        group.append(this.item('table', table, '', sql, []));
      }
      section.append(group);
    }
    return [section];
  }

  /** One clickable row (a real button: Tab reaches it, Enter inserts) and its details. */
  private item(
    kind: 'kb' | 'agent' | 'table' | 'job',
    name: string,
    summary: string,
    sql: string,
    details: [string, string][]
  ): HTMLElement {
    const wrap = el('div', `kbsql-Sidebar-entry kbsql-Sidebar-${kind}`);
    wrap.dataset.name = name;
    const row = el('button', 'kbsql-Sidebar-item');
    row.type = 'button';
    row.title = `Insert a %%kbsql cell:\n${sql}`;
    const badge = { kb: 'KB', agent: 'agent', table: 'table', job: 'job' }[kind];
    // The name gets the whole line (cut with an ellipsis, whole on hover); the counts go
    // under it, so neither is clipped at the sidebar's default width.
    const line = el('span', 'kbsql-Sidebar-line');
    line.append(el('span', 'kbsql-Sidebar-badge', badge), ellipsised('span', 'kbsql-Sidebar-name', name));
    row.append(line);
    if (summary) {
      const note = ellipsised('span', 'kbsql-Sidebar-counts', summary);
      if (kind === 'job' && summary.startsWith('failed')) {
        note.dataset.state = 'error';
      }
      row.append(note);
    }
    row.addEventListener('click', () => {
      if (!insertCell(this.app, { sql })) {
        this.setStatus('Open a notebook to insert a query', 'error');
      }
    });
    wrap.append(row);
    if (details.length) {
      const dl = el('dl', 'kbsql-Sidebar-details');
      for (const [term, value] of details) {
        dl.append(el('dt', '', term), ellipsised('dd', '', value));
      }
      wrap.append(dl);
    }
    return wrap;
  }

  /** Search the chosen knowledge base and list the hits; the search's SQL can become a cell. */
  private async search(): Promise<void> {
    const text = this.searchInput.value.trim();
    if (!this.kbSelect.value) {
      this.hits.replaceChildren(el('div', 'kbsql-Sidebar-error', 'No knowledge base to search'));
      return;
    }
    if (!text) {
      this.hits.replaceChildren(el('div', 'kbsql-Sidebar-error', 'Type something to search for'));
      return;
    }
    const [project, kb] = JSON.parse(this.kbSelect.value) as [string, string];
    this.hits.replaceChildren(el('div', 'kbsql-Sidebar-empty', 'Searching…'));
    this.hits.dataset.state = 'loading';
    try {
      const answer = await this.model.search(project, kb, text);
      const head = el('div', 'kbsql-Sidebar-hitsHead');
      head.append(ellipsised('span', '', `${plural(answer.hits.length, 'hit')} in ${project}.${kb}`));
      const insert = el('button', 'jp-mod-styled kbsql-Sidebar-insertSearch', 'Insert as cell');
      insert.type = 'button';
      insert.addEventListener('click', () => {
        if (!insertCell(this.app, { sql: answer.sql })) {
          this.setStatus('Open a notebook to insert a query', 'error');
        }
      });
      head.append(insert);
      const list = el('ol', 'kbsql-Sidebar-hitList');
      for (const hit of answer.hits) {
        const li = el('li', 'kbsql-Sidebar-hit');
        const meta = el('div', 'kbsql-Sidebar-hitMeta');
        const relevance = hit.relevance === null ? '' : hit.relevance.toFixed(3);
        meta.append(ellipsised('span', 'kbsql-Sidebar-hitId', `id ${hit.id ?? ''}`), el('span', '', relevance));
        li.append(meta, el('div', 'kbsql-Sidebar-hitText', hit.content ?? ''));
        list.append(li);
      }
      this.hits.replaceChildren(head, list);
      this.hits.dataset.state = 'ok';
    } catch (error) {
      this.hits.replaceChildren(el('div', 'kbsql-Sidebar-error', (error as Error).message));
      this.hits.dataset.state = 'error';
    }
  }
}

function counts(kb: IKnowledgeBase): string {
  if (kb.rows === null || kb.chunks === null) {
    return 'counts unavailable';
  }
  return `${plural(kb.rows, 'row')} · ${plural(kb.chunks, 'chunk')}`;
}

function kbDetails(kb: IKnowledgeBase): [string, string][] {
  const rows: [string, string][] = [
    ['content', kb.content_columns.join(', ') || 'content'],
    ['metadata', kb.metadata_columns.join(', ') || '(all other columns)'],
    ['id', kb.id_column],
    ['embedding', kb.embedding_model ?? 'default'],
    ['reranking', kb.reranking_model ?? 'none']
  ];
  if (kb.count_error) {
    rows.push(['counts', kb.count_error]);
  }
  return rows;
}

/** A text inside a SQL string literal ('' for '). */
function sqlText(text: string): string {
  return text.replace(/'/g, "''");
}

/** A job's last run in a few words: when, and whether it failed (the error is in its details). */
function lastRun(job: IJob): string {
  if (!job.last_run) {
    return 'not run yet';
  }
  const when = job.last_run.slice(0, 16);
  if (!job.last_run_end) {
    return `running since ${when}`;
  }
  return job.last_error ? `failed ${when}` : `ran ${when}`;
}

function jobDetails(job: IJob): [string, string][] {
  const rows: [string, string][] = [
    ['schedule', job.schedule ?? 'once'],
    ['next run', job.next_run_at ? `${job.next_run_at.slice(0, 19)} UTC` : '–'],
    ['last run', job.last_run ? `${job.last_run.slice(0, 19)} UTC` : '–']
  ];
  if (job.last_error) {
    rows.push(['error', job.last_error]);
  }
  return rows;
}
