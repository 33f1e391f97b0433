# syntax=docker/dockerfile:1
# hostpath.dev/testtools (busybox + nettool), the image of the e2e test pods:
#   docker build -f build/testtools.Dockerfile -t <registry>/hostpath/testtools:<tag> .
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
WORKDIR /src/e2e
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/nettool ./cmd/nettool

FROM busybox:1.36-musl
COPY --from=build /out/nettool /bin/nettool
CMD ["/bin/sh"]
