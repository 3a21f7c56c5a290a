# Provides Node 24 when the machine's Node is older than agentd needs (>= 22.18).
# Source it: `. scripts/node24.sh` — it puts a cached Node 24 first on PATH for this shell.
# The binary comes from the npm package `node`, installed once into a cache folder.
agentd_node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=18)?0:1)'
}
if ! agentd_node_ok; then
  agentd_node_dir="${AGENTD_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd/node-24}"
  if [ ! -x "$agentd_node_dir/node_modules/node/bin/node" ]; then
    echo "agentd: installing Node 24 into $agentd_node_dir (once)" >&2
    mkdir -p "$agentd_node_dir"
    npm install --prefix "$agentd_node_dir" --no-save --no-package-lock --no-audit --no-fund node@24 >&2 || return 1 2>/dev/null || exit 1
  fi
  PATH="$agentd_node_dir/node_modules/node/bin:$PATH"
  export PATH
  hash -r
fi
echo "agentd: using Node $(node --version)" >&2
