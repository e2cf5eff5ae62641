# The pmx image: one static binary, /pmx, whose subcommands are the processes of the exchange
# (`pmx operator`, `pmx shard`, `pmx api`; charts/pmx runs them), and nothing else: the tools that
# drive and measure an exchange are another command, cmd/pmxtools, not built here. It runs as the
# distroless image's non-root user (65532) on a read-only root filesystem, nothing writable:
# the processes the chart runs write no file (`make test-image` starts them so, with no /tmp).
#
#   make docker-build                  # docker build -t pmx:dev .
#   kind load docker-image pmx:dev     # onto a kind cluster
#   make image                         # the same, with no registry: local stand-ins for both bases
#
# The two base images are build arguments, so that `make image` can build this same file where no
# registry can be reached, from local stand-ins (hack/image/build.sh): a Go toolchain on a static
# shell for GO_IMAGE and CA certificates, tzdata and the nonroot user for BASE_IMAGE.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

# The build stage runs on the builder's platform and cross-compiles for the target's (CGO is off,
# so nothing else is needed): `docker buildx build --platform linux/amd64,linux/arm64` works too.
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
# Modules first, in their own layer: a change to the code does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/pmx ./cmd/pmx

# distroless/static: CA certificates, tzdata and /etc/passwd with the nonroot user; no shell.
FROM ${BASE_IMAGE}
COPY --from=build /out/pmx /pmx
USER 65532:65532
# pmx api's API, pmx shard's internal API, every process's metrics, pmx operator's health probes.
EXPOSE 8080 8090 9090 9091
ENTRYPOINT ["/pmx"]
