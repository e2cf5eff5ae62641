# syntax=docker/dockerfile:1
#
# The pmx image: one static binary, /pmx, whose subcommands are the processes of the exchange
# (`pmx operator`, `pmx shard`, `pmx api`; charts/pmx runs them). It runs as the distroless image's
# non-root user (65532) and writes nothing to disk, so it suits a read-only root filesystem.
#
#   make docker-build                  # docker build -t pmx:dev .
#   kind load docker-image pmx:dev     # onto a kind cluster

# The build stage runs on the builder's platform and cross-compiles for the target's (CGO is off,
# so nothing else is needed): `docker buildx build --platform linux/amd64,linux/arm64` works too.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
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
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pmx /pmx
USER 65532:65532
# pmx api's API, pmx shard's internal API, every process's metrics, pmx operator's health probes.
EXPOSE 8080 8090 9090 9091
ENTRYPOINT ["/pmx"]
