import { Component, type ReactNode } from 'react';
import { Link, Redirect, Route, Router, Switch, useLocation, useRoute } from 'wouter';
import { useHashLocation } from 'wouter/use-hash-location';
import { AuthProvider, useAuth } from './auth.tsx';
import { ChatPage } from './pages/chat.tsx';
import { ComparePage } from './pages/compare.tsx';
import { EvaluationPage } from './pages/evaluation.tsx';
import { EvaluationsPage } from './pages/evaluations.tsx';
import { SessionPage } from './pages/session.tsx';
import { SessionsPage } from './pages/sessions.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { TestsetPage } from './pages/testset.tsx';
import { TestsetsPage } from './pages/testsets.tsx';
import { WorkflowPage } from './pages/workflow.tsx';
import { WorkflowsPage } from './pages/workflows.tsx';
import { ErrorNote, Page } from './ui.tsx';

/**
 * The console: a single page on the hash (`#/sessions/abc`), so every view has a link of its own
 * and the server serves one file for all of them.
 */

function NavLink({ href, children }: { href: string; children: string }) {
  const [active] = useRoute(`${href}/*?`);
  return (
    <Link href={href} aria-current={active ? 'page' : undefined}>
      {children}
    </Link>
  );
}

/**
 * A page that fails while it renders (a reply of a shape it does not expect, from a proxy or an
 * older server) says so in its place; without this React would take the whole console down with
 * it, the navigation too. Keyed by the location, so another page starts afresh.
 */
class PageBoundary extends Component<{ children: ReactNode }, { error: unknown }> {
  override state = { error: undefined };
  static getDerivedStateFromError(error: unknown) {
    return { error };
  }
  override render() {
    if (this.state.error === undefined) return this.props.children;
    return (
      <Page title="This page could not be shown">
        <ErrorNote error={this.state.error} />
        <p className="hint">The other pages still work; reload this one to try again.</p>
      </Page>
    );
  }
}

function Shell() {
  const { signed, signOut } = useAuth();
  const [location] = useLocation();
  return (
    <div className="shell">
      {/* The address's hash is the route: following #main would leave the page for a new chat. It moves the focus instead. */}
      <a
        className="skip"
        href="#main"
        onClick={(event) => {
          event.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <nav aria-label="Main">
        <p className="brand">agentd</p>
        <p className="who">
          <span title={`project ${signed.projectId}`}>{signed.projectName}</span>
          <span className={`badge role-${signed.role}`}>{signed.role}</span>
        </p>
        <ul>
          <li>
            <NavLink href="/chat">Chat</NavLink>
          </li>
          <li>
            <NavLink href="/sessions">Sessions</NavLink>
          </li>
          <li>
            <NavLink href="/evaluations">Evaluations</NavLink>
          </li>
          <li>
            <NavLink href="/testsets">Test sets</NavLink>
          </li>
          <li>
            <NavLink href="/workflows">Workflows</NavLink>
          </li>
          <li>
            <a href="/docs" target="_blank" rel="noopener">
              API reference
            </a>
          </li>
        </ul>
        <button type="button" className="sign-out" onClick={signOut}>
          Sign out ({signed.keyPrefix}…)
        </button>
      </nav>
      <main id="main" tabIndex={-1}>
        <PageBoundary key={location}>
          <Switch>
            <Route path="/chat/:session?">{(params) => <ChatPage key={params.session ?? ''} sessionId={params.session === undefined ? undefined : param(params.session)} />}</Route>
            <Route path="/sessions">{() => <SessionsPage />}</Route>
            <Route path="/sessions/:id">{(params) => <SessionPage key={params.id} sessionId={param(params.id)} />}</Route>
            <Route path="/evaluations">{() => <EvaluationsPage />}</Route>
            <Route path="/evaluations/compare/:a/:b">{(params) => <ComparePage a={param(params.a)} b={param(params.b)} />}</Route>
            <Route path="/evaluations/:id">{(params) => <EvaluationPage id={param(params.id)} />}</Route>
            <Route path="/testsets">{() => <TestsetsPage />}</Route>
            <Route path="/testsets/:id">{(params) => <TestsetPage id={param(params.id)} />}</Route>
            <Route path="/workflows">{() => <WorkflowsPage />}</Route>
            <Route path="/workflows/:id">{(params) => <WorkflowPage id={param(params.id)} />}</Route>
            <Route>
              <Redirect to="/chat" />
            </Route>
          </Switch>
        </PageBoundary>
      </main>
    </div>
  );
}

/**
 * A route parameter as the id it names. Links here encode ids with encodeURIComponent, but wouter
 * decodes the path with decodeURI, which leaves %3A, %2F, %3D… encoded: a session `team:42`
 * would reach the API as `team%3A42` (and be encoded again, a 400).
 */
function param(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

export function App() {
  return (
    <Router hook={useHashLocation}>
      <AuthProvider signInPage={(done) => <SignIn done={done} />}>
        <Shell />
      </AuthProvider>
    </Router>
  );
}
