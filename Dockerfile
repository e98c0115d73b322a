# Will it fit? as a container: the official Streamlit Docker recipe (docs.streamlit.io, "Deploy Streamlit
# using Docker"). Build: docker build -t will-it-fit .   Run: docker run -p 8501:8501 will-it-fit
FROM python:3.11-slim

WORKDIR /app

# curl for the HEALTHCHECK below.
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*

# Runtime packages only (requirements.txt); layers with dependencies are cached across code changes.
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

# The optional exact trace (requirements-exact.txt): CPU torch from PyTorch's CPU index (PyPI's torch is a
# multi-GB CUDA build), then transformers, peft, trl at the pinned versions. ~1 GB more image.
COPY requirements-exact.txt .
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements-exact.txt

COPY . .

# An unprivileged user with UID 1000 (what Hugging Face Docker Spaces expect; harmless elsewhere).
RUN useradd --create-home --uid 1000 app && chown -R app /app
USER app

EXPOSE 8501

HEALTHCHECK CMD curl --fail http://localhost:8501/_stcore/health

ENTRYPOINT ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
