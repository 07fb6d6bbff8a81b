# Serverless Manager image: a static binary with the chart embedded, on a
# distroless non-root base. Build with `make docker-build`.
FROM golang:1.26 AS build
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY charts/ charts/
COPY operator/ operator/
ARG VERSION=dev
RUN go build -trimpath -ldflags "-s -w" -o /manager ./operator/cmd/manager

FROM gcr.io/distroless/static:nonroot
COPY --from=build /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
