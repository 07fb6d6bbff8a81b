# Image of one binary of the module (BINARY: manager, function-controller,
# registry-agent or activator), for those with a container engine: `make docker-build`.
# It is the image `make image` assembles without one (hack/image): FROM
# scratch, the static binary as entrypoint, CA certificates, passwd/group
# entries for the non-root user 65532 (home /tmp) and an empty /tmp (mode
# 1777) as the one writable mount point, so the root filesystem can be
# read-only.
ARG BINARY=manager

FROM golang:1.26 AS build
# GOFIPS140: Go's FIPS 140-3 module, as `make build` and `make image`
# (docs/contributor/fips.md).
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFIPS140=v1.0.0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY charts/ charts/
COPY operator/ operator/
ARG BINARY
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp \
 && go build -trimpath -ldflags "-s -w" -o /rootfs/${BINARY} ./operator/cmd/${BINARY} \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n' >/rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group \
 && chmod 0644 /rootfs/etc/passwd /rootfs/etc/group /rootfs/etc/ssl/certs/ca-certificates.crt \
 && chmod 1777 /rootfs/tmp

FROM scratch AS image
COPY --from=build /rootfs/ /
ARG VERSION=dev
ARG REVISION=""
LABEL org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION} \
      org.opencontainers.image.source=https://github.com/kyma-project/serverless-manager
USER 65532:65532
WORKDIR /

# ENTRYPOINT does not expand variables: one stage per binary, picked below.
FROM image AS manager
LABEL org.opencontainers.image.title=serverless-manager
ENTRYPOINT ["/manager"]

FROM image AS function-controller
LABEL org.opencontainers.image.title=serverless-function-controller
ENTRYPOINT ["/function-controller"]

FROM image AS registry-agent
LABEL org.opencontainers.image.title=serverless-registry-agent
ENTRYPOINT ["/registry-agent"]

FROM image AS activator
LABEL org.opencontainers.image.title=serverless-activator
ENTRYPOINT ["/activator"]

FROM ${BINARY}
