import { useState, type FormEvent } from 'react';
import { signIn, type Signed } from '../auth.tsx';
import { errorText } from '../ui.tsx';

/** An API key in, the key's project out: the project is always the key's own. */
export function SignIn({ done }: { done: (signed: Signed) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      done(await signIn(key.trim()));
    } catch (failure) {
      setError(errorText(failure));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="sign-in">
      <form onSubmit={submit} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">agentd console</h1>
        <p className="muted">Sign in with an API key. The console acts in the key's project, with the key's role.</p>
        <label htmlFor="api-key">API key</label>
        <input id="api-key" type="password" autoComplete="off" spellCheck={false} placeholder="agd_…" value={key} onChange={(e) => setKey(e.target.value)} required autoFocus />
        <button type="submit" disabled={busy || key.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error ? (
          <p role="alert" className="error-note">
            {error}
          </p>
        ) : null}
        <p className="hint">
          The first <code>npm start</code> prints a key; <code>npm run agentd -- keys create --project NAME</code> makes more. The key stays in this tab only.
        </p>
      </form>
    </main>
  );
}
