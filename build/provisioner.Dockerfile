# syntax=docker/dockerfile:1
# hostpath.dev/provisioner, for users with a registry:
#   docker build -f build/provisioner.Dockerfile -t <registry>/hostpath/provisioner:<tag> .
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
WORKDIR /src/provisioner
RUN --mount=type=cache,target=/root/.cache/go-build --mount=type=cache,target=/go/pkg/mod \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/provisioner ./cmd/provisioner

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/provisioner /usr/local/bin/provisioner
# Runs as the non-root user 65532.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/provisioner"]
