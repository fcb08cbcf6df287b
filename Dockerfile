# syntax=docker/dockerfile:1
# A container for `quiver serve`: a static binary (pure Go, no cgo) on a distroless base,
# running as a non-root user, with its data (SQLite database, journal, secret key) in the
# volume /data.
#
#   docker build -t quiver --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -p 8080:8080 -v quiver-data:/data quiver
#
# The server listens on 0.0.0.0:8080 inside the container; publish the port only where its
# clients can reach it. Clients that reach it by a name or address other than localhost need
# -e QUIVER_PUBLIC_URL=http://that-host:8080 (the server refuses other Host headers, against DNS
# rebinding).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a change to the source does not download them again.
COPY go.mod go.sum ./
# The patched MCP go-sdk go.mod's replace names (third_party/README.md): its requirements too.
COPY third_party/go-sdk/go.mod third_party/go-sdk/go.sum ./third_party/go-sdk/
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/quiver ./cmd/quiver
# The data directory, created here because the final image has no shell: a named volume
# mounted on /data starts as a copy of it, owned by the user the server runs as.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/quiver /usr/local/bin/quiver
COPY --from=build --chown=65532:65532 /out/data /data
ENV XDG_DATA_HOME=/data \
    QUIVER_ADDR=0.0.0.0:8080
VOLUME ["/data"]
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/quiver"]
CMD ["serve"]
