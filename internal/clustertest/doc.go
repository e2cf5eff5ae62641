// Package clustertest runs pmx the way its Helm chart installs it, on real pods: the one-node
// cluster of hack/cluster (kubelet, containerd, CNI, kube-proxy and CoreDNS as host processes),
// with the images `make image` builds. `make test-cluster` brings the cluster up, runs
// TestCluster on it and takes it down; `go test ./...` without it skips the test.
package clustertest
