# How the launcher of a sandbox pod runs an exec'd program (ADR 47): `sh -c "<this file>"
# berth-program EXT SIZE INTERPRETER...`. Its stdin is the program's SIZE bytes, then the
# program's own stdin (if the exec has one). The program goes to a file with the language's
# extension (Node decides TypeScript by it), read exactly with dd, and the interpreter runs it
# with the rest of stdin; the file goes when it ends. A pod has no host mount to hand the file
# over through. The launcher keeps the limit and the process group (this shell leads it).
dir=$(mktemp -d "${TMPDIR:-/tmp}/berth-exec.XXXXXX") || exit 125
file="$dir/main.$1"
size=$2
shift 2
if [ "$size" -gt 0 ]; then dd bs="$size" count=1 iflag=fullblock of="$file" 2>/dev/null || exit 125; else : >"$file"; fi
"$@" "$file"
status=$?
rm -rf "$dir"
exit $status
