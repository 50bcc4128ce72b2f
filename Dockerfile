# The ark-broker image: a release build of the one binary on debian:bookworm-slim, run as uid 1001.
# Needs DATABASE_URL at run time (the image has no PostgreSQL for the embedded mode); migrations run at start-up.
#   docker build -t ark-broker:dev .      (docker-compose.yml builds it too)

# -- builder ---------------------------------------------------------------------------------------------------
FROM rust:1.95-bookworm AS builder
WORKDIR /src
# Compile-time SQL checks read the committed .sqlx/ data, never a database.
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never

# Dependencies first, against stub sources: this layer stays cached until Cargo.toml or Cargo.lock changes.
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
RUN mkdir -p src tests/api \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs tests/api/main.rs \
 && cargo build --release --locked \
 && rm -rf src tests target/release/.fingerprint/ark-broker-* target/release/deps/ark_broker-* \
           target/release/deps/libark_broker-*

# Then the broker itself.
COPY .sqlx .sqlx
COPY migrations migrations
COPY src src
RUN cargo build --release --locked --bin ark-broker \
 && install -m 0755 target/release/ark-broker /usr/local/bin/ark-broker

# -- runtime ---------------------------------------------------------------------------------------------------
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1001 ark \
 && useradd --uid 1001 --gid 1001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ark
COPY --from=builder /usr/local/bin/ark-broker /usr/local/bin/ark-broker
USER 1001:1001
WORKDIR /tmp
ENV HOST=0.0.0.0 PORT=8080 MCP_PORT=8081 ARK_BROKER_LOG_FORMAT=json
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/ark-broker"]
