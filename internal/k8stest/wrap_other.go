//go:build !linux

package k8stest

import "path/filepath"

// wrapBinaries returns the binaries themselves: outside Linux there is no PR_SET_PDEATHSIG, and a
// killed test can leave kube-apiserver and etcd running (see wrap_linux.go).
func wrapBinaries(_, bins string) (apiserver, etcd string, err error) {
	return filepath.Join(bins, "kube-apiserver"), filepath.Join(bins, "etcd"), nil
}
