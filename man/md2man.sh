#!/bin/sh
# md2man.sh SRC.md VERSION DATE: prints the roff man page of a man page
# written in libfabric's markdown form (man/fi_rustfab.7.md), the way
# libfabric's config/md2nroff.pl does it: the Jekyll include is dropped,
# links are reduced to their text (pandoc would print the URLs), and pandoc
# writes the page. The title block's "fi_rustfab(7)" gives name and section;
# the footer carries rustfab's version, the date is the release's (both from
# the Makefile: Cargo.toml and CHANGELOG.md), so the output depends only on
# its inputs and the pandoc version.
set -eu
src=$1 version=$2 date=$3
command -v pandoc >/dev/null || { echo "md2man.sh: pandoc not found (apt-get install pandoc)" >&2; exit 1; }
sed -e '/^{% include .* %}$/d' -e 's/\[\([^]]*\)\]([^)]*)/\1/g' "$src" |
	pandoc --standalone --from=markdown-smart --to=man \
		--metadata=header:"Libfabric Programmer's Manual" \
		--metadata=footer:"rustfab $version" \
		--metadata=date:"$date"
