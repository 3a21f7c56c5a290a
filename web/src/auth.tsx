import { createContext, useCallback, useContext, useMemo, useState, type ReactNode } from 'react';
import { createClient, type AgentdClient } from '../../src/client/index.ts';

/**
 * Who is signed in. The API key lives in this tab's session storage only: never in a URL, a cookie
 * or local storage, so closing the tab forgets it and no other site or tab can send it.
 */

type Role = 'viewer' | 'editor' | 'admin';

export interface Signed {
  key: string;
  projectId: string;
  projectName: string;
  role: Role;
  keyPrefix: string;
}

interface Auth {
  signed: Signed;
  client: AgentdClient;
  /** The role may act (run turns, answer approvals, write); a viewer only reads. */
  canAct: boolean;
  isAdmin: boolean;
  signOut(): void;
}

const STORAGE_KEY = 'agentd.console.auth';
/** Conversations the chat keeps in this browser (chat.tsx); forgotten with the key. */
export const CHAT_STORAGE_PREFIX = 'agentd.console.chat.';

const AuthContext = createContext<Auth | undefined>(undefined);

function stored(): Signed | undefined {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Signed) : undefined;
  } catch {
    return undefined;
  }
}

const clientFor = (key: string, projectId?: string) => createClient({ baseUrl: window.location.origin, apiKey: key, ...(projectId ? { projectId } : {}) });

/** Asks the server who the key is; throws its error (401 for a wrong key) otherwise. */
export async function signIn(key: string): Promise<Signed> {
  const self = await clientFor(key).keys.self();
  const signed: Signed = { key, projectId: self.project.id, projectName: self.project.name, role: self.key.role, keyPrefix: self.key.prefix };
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(signed));
  return signed;
}

export function AuthProvider({ children, signInPage }: { children: ReactNode; signInPage: (done: (signed: Signed) => void) => ReactNode }) {
  const [signed, setSigned] = useState<Signed | undefined>(stored);
  const signOut = useCallback(() => {
    sessionStorage.removeItem(STORAGE_KEY);
    for (const key of Object.keys(localStorage)) if (key.startsWith(CHAT_STORAGE_PREFIX)) localStorage.removeItem(key);
    setSigned(undefined);
  }, []);
  const auth = useMemo<Auth | undefined>(
    () =>
      signed && {
        signed,
        client: clientFor(signed.key, signed.projectId),
        canAct: signed.role !== 'viewer',
        isAdmin: signed.role === 'admin',
        signOut,
      },
    [signed, signOut],
  );
  if (!auth) return <>{signInPage(setSigned)}</>;
  return <AuthContext.Provider value={auth}>{children}</AuthContext.Provider>;
}

export function useAuth(): Auth {
  const auth = useContext(AuthContext);
  if (!auth) throw new Error('useAuth outside AuthProvider');
  return auth;
}
