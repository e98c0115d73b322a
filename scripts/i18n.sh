#!/usr/bin/env bash
# Re-extract the marked strings into locales/messages.pot and merge them into each language's .po
# (new strings appear untranslated, changed ones fuzzy: tests/test_i18n.py fails until they are translated).
set -euo pipefail
cd "$(dirname "$0")/.."
BABEL=${BABEL:-.venv/bin/pybabel}
"$BABEL" extract -F babel.cfg --no-location --sort-output --project "Will it fit?" --version 0.1 \
  --msgid-bugs-address "" --copyright-holder "" -c "TRANSLATORS:" -o locales/messages.pot .
for lang in ${LANGS:-es}; do
  if [ -f "locales/$lang/LC_MESSAGES/messages.po" ]; then
    "$BABEL" update -i locales/messages.pot -d locales -l "$lang" --no-wrap --ignore-obsolete
  else
    "$BABEL" init -i locales/messages.pot -d locales -l "$lang" --no-wrap
  fi
done
# A fixed creation date: re-extracting unchanged strings leaves both files unchanged (no merge noise).
sed -i 's/^"POT-Creation-Date: .*"$/"POT-Creation-Date: 2026-12-01 00:00+0000\\n"/' locales/messages.pot locales/*/LC_MESSAGES/messages.po
