#!/usr/bin/env bash
# make readme-check (part of make lint): the README's performance table is
# exactly c-tests/bench/table.sh's output for the dated run it names
# (<!-- bench-table: docs/bench/DATE -->), so no figure in it lacks a run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
rel=$(sed -n 's/^<!-- bench-table: \(.*\) -->$/\1/p' README.md)
[ -n "$rel" ] || { echo "readme-check: README.md has no <!-- bench-table: docs/bench/DATE --> marker" >&2; exit 1; }
[ -f "$rel/env.txt" ] || { echo "readme-check: $rel/env.txt is missing (publish the run with c-tests/bench/publish.sh)" >&2; exit 1; }
want=$(c-tests/bench/table.sh "$rel")
have=$(awk '/^<!-- bench-table: /{on=1; next} /^<!-- \/bench-table -->/{on=0} on' README.md)
if [ "$want" != "$have" ]; then
	echo "readme-check: README.md's performance table differs from c-tests/bench/table.sh $rel:" >&2
	diff <(echo "$have") <(echo "$want") >&2 || true
	exit 1
fi
echo "readme-check: README's table is the run in $rel"
