# LETEO-Fed: one image for every party (CSP, aggregator, owner agents, analyst CLI).
#   docker build -t leteo-fed .
#   docker run --rm leteo-fed --help
# See deploy/compose/README.md for a full deployment with docker compose.

# bookworm pinned: it ships openjdk-17 (newer Debian releases dropped it).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Java runtime for Spark (owner agents read large or remote data sets through PySpark).
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Dependencies first, from pyproject.toml alone: this layer is rebuilt only when they change.
# One image serves every party, so it carries the base and the spark, plots, bench and sql extras
# (a site that installs with pip alone needs only the base).
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + [r for x in ('spark', 'plots', 'bench', 'sql') for r in p['optional-dependencies'][x]]))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# Then the project itself (no dev extras).
COPY README.md ./
COPY leteo_fed ./leteo_fed
COPY owner_agent ./owner_agent
COPY aggregator ./aggregator
COPY csp ./csp
RUN pip install --no-deps . && rm -rf /src/build /src/*.egg-info

# Non-root user. The mount points are created and owned by it so that fresh named volumes
# (certificates, CSP keys, results) start out writable by the services.
RUN useradd --create-home --home-dir /home/leteo --uid 10001 --user-group --shell /usr/sbin/nologin leteo \
    && mkdir -p /certs /keys /out /data /config /state \
    && chown leteo:leteo /certs /keys /out /state \
    && chmod 700 /keys
USER leteo
WORKDIR /home/leteo

ENTRYPOINT ["leteo-fed"]
CMD ["--help"]
