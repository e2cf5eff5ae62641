#!/usr/bin/env bash
# Packs bin/devbench for one trip to a bare device machine (make devbench): pmx and pmxtools, this
# machine's PostgreSQL (its programs, their data files, and the libraries they need that a bare
# Linux may lack), and kube-apiserver and etcd for pmxtools bench --distributed, in one tarball
# compressed hard enough that it and the working tree fit the device's carry (64 MiB) together:
# then the 16-core figures take one call, not two. Beside it, bin/devbench/run, which unpacks the
# tarball there once and runs its arguments with all of it on PATH:
#
#   hack/devbench/pack.sh KUBE_ASSETS              # here: a folder holding kube-apiserver and etcd
#   bash bin/devbench/run pmxtools bench --help    # there; hack/devbench/issue17.sh runs it so
#
# The four Go programs share much (the runtime, Kubernetes' client libraries), so they go first and
# side by side, and xz gets a window that spans them all (256 MiB, one thread: 4 to 8 minutes on 2
# cores; as much memory to unpack): 7.5 MiB less than xz -9e -T0, whose blocks start afresh every
# 192 MiB, and which was over the carry. xz's x86 filter (branch targets made absolute, so that
# calls to one function repeat) takes 1.1 MiB more off.
#
# The device machine is x86-64 Linux with neither Go nor Postgres: pmx and pmxtools are static;
# Postgres's libraries travel, less the C and C++ runtimes, and run copies onto the machine's
# library path only those it lacks. PGV is the Postgres version (default 15, /usr/lib/postgresql/$PGV);
# PMX_BEFORE another pmx build to carry as pmx-before, to alternate with pmx in one call (ab.sh);
# NO_K8S=1 leaves kube-apiserver and etcd out, to make room for it.
set -euo pipefail
assets=${1:?usage: hack/devbench/pack.sh KUBE_ASSETS (a folder holding kube-apiserver and etcd)}
pgv=${PGV:-15}
k8s=(k8s/kube-apiserver k8s/etcd)
if [ -n "${NO_K8S:-}" ]; then # room for PMX_BEFORE: no distributed bench then
	k8s=()
else
	for f in kube-apiserver etcd; do
		[ -x "$assets/$f" ] || { echo "pack: no $assets/$f; make k8s-bins builds it" >&2; exit 1; }
	done
fi
pglib=/usr/lib/postgresql/$pgv pgshare=/usr/share/postgresql/$pgv
[ -x "$pglib/bin/postgres" ] && [ -d "$pgshare" ] ||
	{ echo "pack: no PostgreSQL $pgv in $pglib and $pgshare: install postgresql-$pgv, or name another with PGV" >&2; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=bin/devbench
rm -rf "$out" && mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "pack: building pmx and pmxtools (static)"
for cmd in pmx pmxtools; do
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/$cmd" "./cmd/$cmd"
done
# Postgres as Debian installs it, less what pmx dev and the bench never run: the programs but
# those pmx calls (requiredBinaries in internal/kit/pgcluster, checked below) and a few for a
# person at the machine, the modules but PL/pgSQL, pg_stat_statements (--statements), the text
# search dictionaries and the encoding conversions that initdb's catalog names, the JIT (LLVM:
# large, and off unless asked for), the other extensions' scripts, and the manual pages.
mkdir -p "$tmp/root/usr/lib/postgresql" "$tmp/root/usr/share/postgresql" "$tmp/libs" "$tmp/k8s"
cp -a "$pglib" "$tmp/root/usr/lib/postgresql/"
cp -a "$pgshare" "$tmp/root/usr/share/postgresql/"
pgroot=$tmp/root/usr/lib/postgresql/$pgv
find "$pgroot/bin" -mindepth 1 -maxdepth 1 -not -regex '.*/\(initdb\|postgres\|postmaster\|psql\|createdb\|dropdb\|pg_ctl\|pg_isready\)' -exec rm -rf {} +
find "$pgroot/lib" -mindepth 1 -maxdepth 1 -not -regex '.*/\(plpgsql\|pg_stat_statements\|dict_snowball\|[a-z0-9_]*_and_[a-z0-9_]*\|euc2004_sjis2004\)\.so' -exec rm -rf {} +
find "$tmp/root/usr/share/postgresql/$pgv/extension" -mindepth 1 -not -regex '.*/\(plpgsql\|pg_stat_statements\)[-.][^/]*' -delete
rm -rf "$tmp/root/usr/share/postgresql/$pgv/man"
for f in initdb postgres psql createdb dropdb; do
	[ -x "$pgroot/bin/$f" ] || { echo "pack: no $f in $pglib/bin" >&2; exit 1; }
done
# The libraries its programs and modules load, less the C and C++ runtimes every Linux has.
for f in "$pgroot/bin/"* "$pgroot/lib/"*.so; do
	ldd "$f" 2>/dev/null | awk '/=>/ { print $3 }'
done | sort -u | { grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so' || true; } |
	xargs -r -I{} cp -L {} "$tmp/libs/"
[ ${#k8s[@]} = 0 ] || cp "$assets/kube-apiserver" "$assets/etcd" "$tmp/k8s/"
echo "pack: compressing pmx, pmxtools, kube-apiserver, etcd and Postgres (xz, one thread, several minutes)"
# PMX_BEFORE names another pmx build to carry beside it (as pmx-before, for pmxtools bench --pmx):
# next to pmx in the tarball, most of it costs nothing in xz's window.
before=()
if [ -n "${PMX_BEFORE:-}" ]; then
	cp "$PMX_BEFORE" "$tmp/pmx-before" && before=(pmx-before)
fi
tar -C "$tmp" -cf - pmx "${before[@]}" pmxtools "${k8s[@]}" root libs | xz -T1 --x86 --lzma2=preset=9e,dict=256MiB >"$out/bundle.tar.xz"

cat >"$out/run" <<RUN
#!/usr/bin/env bash
# Unpacks bundle.tar.xz beside it into \${PMXBENCH_DIR:-/opt/pmxbench} (again only when the bundle
# changed), then runs its arguments there with pmx, pmxtools and PostgreSQL $pgv on PATH.
set -euo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
b=\${PMXBENCH_DIR:-/opt/pmxbench}
sum=\$(sha256sum "\$here/bundle.tar.xz" | cut -d' ' -f1)
if [ "\$(cat "\$b/.bundle" 2>/dev/null)" != "\$sum" ]; then
	rm -rf "\$b" && mkdir -p "\$b/extra"
	xz -dc "\$here/bundle.tar.xz" | tar -C "\$b" -xf -
	# pmx's Postgres runs as the postgres user when started by root.
	id postgres >/dev/null 2>&1 || useradd -r -M -d /nonexistent postgres
	# (The cache read once: grep -q in a pipe from ldconfig could end it early, a failure to pipefail.)
	cache=\$(ldconfig -p)
	for f in "\$b"/libs/*; do
		[ -e "\$f" ] || continue
		n=\$(basename "\$f")
		grep -q "/\$n\\\$" <<<"\$cache" || cp "\$f" "\$b/extra/"
	done
	if [ -n "\$(ls -A "\$b/extra")" ]; then
		echo "\$b/extra" >/etc/ld.so.conf.d/000-pmxbench.conf && ldconfig
	fi
	chmod -R o+rX "\$b"
	echo "\$sum" >"\$b/.bundle"
fi
export PATH=\$b:\$b/root/usr/lib/postgresql/$pgv/bin:\$PATH
cd /tmp && exec "\$@"
RUN
chmod +x "$out/run"

# What travels: the working tree (tracked and untracked files git does not ignore) and the pack.
limit=$((64 * 1024 * 1024))
# (A tracked file deleted from the tree does not travel: stat skips it.)
tree=$({ git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true; } |
	awk '{ s += $1 } END { print s + 0 }')
pack=$(du -sb "$out" | cut -f1)
echo "pack: $out $((pack / 1024)) KiB + working tree $((tree / 1024)) KiB of the carry's $((limit / 1024)) KiB"
if [ $((pack + tree)) -gt "$limit" ]; then
	echo "pack: over the device's carry by $(((pack + tree - limit) / 1024)) KiB" >&2
	exit 1
fi
