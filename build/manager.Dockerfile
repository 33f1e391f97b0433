# syntax=docker/dockerfile:1
# hostpath.dev/manager, for users with a registry:
#   docker build -f build/manager.Dockerfile -t <registry>/hostpath/manager:<tag> .
# (run from the repository root). scripts/images.sh builds the same image
# without Docker for the local cluster.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.work ./
COPY api/ api/
COPY manager/ manager/
COPY provisioner/ provisioner/
COPY hostdefiner/ hostdefiner/
COPY e2e/ e2e/
COPY tools/ tools/
WORKDIR /src/manager
RUN --mount=type=cache,target=/root/.cache/go-build --mount=type=cache,target=/go/pkg/mod \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager

FROM gcr.io/distroless/static-debian12:latest
COPY --from=build /out/manager /usr/local/bin/manager
# The manager runs as root: it creates directories in root-owned hostPath pools.
USER 0:0
ENTRYPOINT ["/usr/local/bin/manager"]
