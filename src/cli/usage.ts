/** Width help is written to when the output is no terminal (a pipe, a file, a test): the classic one. */
const DEFAULT_WIDTH = 80;

const indentOf = (line: string) => /^ */.exec(line)![0].length;

/** Where a line's description starts: past an option's or a command's name (the first run of two spaces or more), else at its indent. */
function hangingColumn(line: string): number {
  return /^( *\S+(?: \S+)* {2,})\S/.exec(line)?.[1]!.length ?? indentOf(line);
}

/**
 * A command's usage fitted to `width` (a terminal's, else 80), so the text is written once and
 * reads at any width. A line too long is cut at a space, and what is cut goes on at the start of
 * the line's continuation (the next line, when it is indented to where this line's description
 * starts: more of the same description, or of the same paragraph at the left margin), else on a
 * line of its own under that description.
 */
export function fitUsage(text: string, width = process.stdout.isTTY && process.stdout.columns ? process.stdout.columns : DEFAULT_WIDTH): string {
  const room = Math.max(width, 40);
  const input = text.split('\n');
  const out: string[] = [];
  // Where the description of the option or command above starts: a line indented to it goes on with that description.
  let described: number | undefined;
  for (let i = 0; i < input.length; i++) {
    let line = input[i]!;
    if (line.trim() === '') described = undefined;
    else if (hangingColumn(line) > indentOf(line)) described = hangingColumn(line);
    while (line.length > room) {
      const column = hangingColumn(line);
      const named = column > indentOf(line);
      // Beside a name that takes over half the room, too little is left: go on under the line's indent.
      const hang = named && column <= room / 2 ? column : indentOf(line);
      let cut = line.lastIndexOf(' ', room);
      // No space within the room past the indent: a word longer than the room goes whole.
      if (cut <= hang) cut = line.indexOf(' ', room);
      if (cut === -1) break;
      const carried = line.slice(cut).trimStart();
      out.push(line.slice(0, cut).trimEnd());
      const next = input[i + 1];
      // An indented line of its own (a command line of an example) is no continuation.
      const continues = next !== undefined && next.trim() !== '' && indentOf(next) === hang && !/^ *-/.test(next) && (named ? hang === column : hang === 0 || hang === described);
      if (continues) {
        input[i + 1] = `${' '.repeat(hang)}${carried} ${next.trimStart()}`;
        line = '';
        break;
      }
      line = `${' '.repeat(hang)}${carried}`;
    }
    if (line !== '' || input[i] === '') out.push(line);
  }
  return out.join('\n');
}
