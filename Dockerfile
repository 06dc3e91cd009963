# hudi-keeper: the daemon image.
#
#   docker build -t hudi-keeper .          (or: podman build / buildah build)
#   docker run -p 9464:9464 -v $PWD/my-config.toml:/etc/hudi-keeper/hudi-keeper.toml:ro hudi-keeper
#
# The base images are build arguments, so the image can be built from locally made bases, offline
# (scripts/check-image does that with debootstrap and buildah). The builder needs cargo (and a C
# linker); the runtime needs glibc and CA certificates.
ARG BUILDER_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
# The release profile's optimization level: 3 (cargo's) for the image you run. scripts/check-image
# passes 0 to check the Dockerfile in CI without the 10+ minutes an optimized build takes there.
ARG RELEASE_OPT_LEVEL=3
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY config ./config
# Integration tests live at the workspace root; the manifest names them, the build needs none.
COPY tests ./tests
RUN CARGO_PROFILE_RELEASE_OPT_LEVEL="${RELEASE_OPT_LEVEL}" cargo build --release --locked -p hudi-keeper \
 && install -D -m 0755 target/release/hudi-keeper /out/hudi-keeper

FROM ${RUNTIME_IMAGE}
# A fixed unprivileged user; the config is mounted at /etc/hudi-keeper, state is kept in
# /var/lib/hudi-keeper (tables registered through the API).
COPY --from=build /out/hudi-keeper /usr/local/bin/hudi-keeper
COPY deploy/image/hudi-keeper.toml /etc/hudi-keeper/hudi-keeper.toml
RUN useradd --system --uid 10001 --user-group --create-home \
      --home-dir /var/lib/hudi-keeper --shell /usr/sbin/nologin hudi-keeper
USER 10001:10001
WORKDIR /var/lib/hudi-keeper
ENV MALLOC_ARENA_MAX=2
EXPOSE 9464 9465
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/hudi-keeper", "health", "--addr", "127.0.0.1:9465"]
ENTRYPOINT ["/usr/local/bin/hudi-keeper", "serve"]
CMD ["--config", "/etc/hudi-keeper/hudi-keeper.toml"]
