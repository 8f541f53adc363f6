#!/usr/bin/env python3
"""Reference data and expected values for the text plugin (plugins/text) and the text example.

(a) Writes test datasets to tests/data/text/*.jsonl, deterministically (fixed seeds), from real
    sentences available offline: the Apache-2.0 and GPL-3 licence texts of Debian's
    /usr/share/common-licenses and Python's LICENSE.txt (English), and the Chinese, Japanese and
    Korean sample sentences of nltk's tokenize/nist.py, tokenize/stanford_segmenter.py and rich's
    __main__.py (installed packages; Apache-2.0 / MIT). Hypotheses are deterministic corruptions
    (dropped, swapped, substituted, duplicated words; case changes; typos; accents); the data holds
    Unicode (accents, Greek with final sigma, German sharp s, dotted I, Kelvin sign, CJK, NBSP,
    tabs, runs of spaces), empty hypotheses, and 1 to 4 references per sample.
      mt.jsonl     {"pred": str, "refs": [str, ...]}   BLEU, ROUGE (first prediction English)
      mt_zh.jsonl  {"pred": str, "refs": [str, ...]}   BLEU, ROUGE with tokenizer auto -> 'cn'
      ocr.jsonl    {"pred": str, "gt": str}            WordAccuracy, CharRecallPrecision
      asr.jsonl    {"pred": str, "gt": str}            WER, CER
(b) Writes tests/reference/expected_text.json: for every case the metric, its tally parameters,
    its data file, the expected values and the exact library call that produced them, with the
    library versions. mmeval is run on the whole dataset in one process (one add() call), where
    its ROUGE divides by the true sample count.
(c) Writes configs/examples/data/text/translations.jsonl (the example's data) and the expected
    results of configs/examples/text.yaml (section "example").

Run from the repository root, in the reference environment:

    .venv-ref/bin/python tests/reference/text.py
"""

import json
import platform
import random
import re
from pathlib import Path

import jiwer
import mmeval
import numpy as np
import sacrebleu
from mmeval.metrics import BLEU, ROUGE, CharRecallPrecision, WordAccuracy
from sacrebleu.metrics import BLEU as SacreBLEU

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "text"
OUT = ROOT / "tests" / "reference" / "expected_text.json"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "text"
SITE = Path(np.__file__).resolve().parents[1]


def rel(path):
    return str(Path(path).relative_to(ROOT))


# ---- (a) sentences ------------------------------------------------------------------------------

def english_sentences():
    texts = []
    for p in ["/usr/share/common-licenses/Apache-2.0", "/usr/share/common-licenses/GPL-3",
              "/usr/lib/python3.11/LICENSE.txt"]:
        texts.append(Path(p).read_text(encoding="utf-8"))
    out = []
    for t in texts:
        t = re.sub(r"\s+", " ", t)
        for s in re.split(r"(?<=[.;:])\s+", t):
            s = s.strip()
            words = s.split()
            if 6 <= len(words) <= 40 and re.search(r"[a-z]", s) and "====" not in s:
                out.append(s)
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def cjk_sentences():
    out = []
    for p, pat in [(SITE / "nltk/tokenize/nist.py", r"u'([^']*[\u4e00-\u9fa5][^']*)'"),
                   (SITE / "nltk/tokenize/stanford_segmenter.py", r"u'([^']*[\u4e00-\u9fa5][^']*)'"),
                   (SITE / "rich/__main__.py", r":flag_for_\w+:\s+([^\\\n\"]+)")]:
        for m in re.finditer(pat, Path(p).read_text(encoding="utf-8")):
            out.append(m.group(1).strip())
    return out


UNICODE_EXTRA = [
    "The café on the Straße sells crème brûlée and smørrebrød to naïve tourists.",
    "ΟΔΟΣ ΣΟΦΙΑΣ is the Greek for the road of wisdom, written in capitals.",
    "İstanbul and the KELVIN sign K are two oddities of Unicode case mapping.",
    "A non\u00a0breaking space and a\ttab\tseparate these words.",
    "Zoë and Chloë met Renée at the Ångström laboratory in Malmö.",
]


def corrupt_words(rng, s, vocab, strength):
    words = s.split(" ")
    out = []
    for w in words:
        r = rng.random()
        if r < strength * 0.25:
            continue  # drop
        if r < strength * 0.5:
            out.append(rng.choice(vocab))  # substitute
            continue
        if r < strength * 0.6:
            out.extend([w, w])  # duplicate
            continue
        if r < strength * 0.7:
            out.append(w.upper() if rng.random() < 0.5 else w.lower())
            continue
        out.append(w)
    if len(out) > 3 and rng.random() < strength:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def corrupt_chars(rng, s, strength):
    letters = "abcdefghijklmnopqrstuvwxyzéüß"
    out = []
    for ch in s:
        r = rng.random()
        if r < strength * 0.3:
            continue
        if r < strength * 0.6:
            out.append(rng.choice(letters))
            continue
        if r < strength * 0.7:
            out.append(ch.swapcase())
            continue
        if r < strength * 0.75:
            out.append(ch + rng.choice("-.,'$"))
            continue
        out.append(ch)
    return "".join(out)


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return rel(path)


def make_mt(rng, sentences, n, first_cjk=False):
    vocab = sorted({w for s in sentences for w in s.split()})
    rows = []
    for i in range(n):
        s = sentences[i % len(sentences)]
        kind = rng.random()
        nrefs = 1 + (i % 4 if i % 5 else 0)
        refs = [s] + [corrupt_words(rng, s, vocab, 0.3) for _ in range(nrefs - 1)]
        rng.shuffle(refs)
        if i % 23 == 7:
            pred = ""  # empty hypothesis
        elif i % 31 == 11:
            pred = s  # exact
        elif kind < 0.6:
            pred = corrupt_words(rng, s, vocab, 0.4)
        else:
            pred = corrupt_chars(rng, corrupt_words(rng, s, vocab, 0.2), 0.05)
        if i % 17 == 3:
            pred = "  " + pred + " \t"
        rows.append({"pred": pred, "refs": refs})
    if first_cjk:
        rows.sort(key=lambda r: not re.search(r"[\u4e00-\u9fa5]", r["pred"]))
    return rows


def make_ocr(rng, sentences):
    words = []
    for s in sentences:
        words.extend(w for w in s.split() if len(w) > 1)
    rng.shuffle(words)
    words = words[:220]
    rows = []
    for i, w in enumerate(words):
        r = rng.random()
        if i % 29 == 5:
            pred = ""
        elif r < 0.3:
            pred = w
        elif r < 0.45:
            pred = w.upper() if i % 2 else w.lower()
        elif r < 0.6:
            pred = "$" + w.swapcase() + "!"
        else:
            pred = corrupt_chars(rng, w, 0.2)
        rows.append({"pred": pred, "gt": w})
    # Long lines (>= 200 characters: difflib's autojunk) and Unicode case mapping.
    long_gt = " ".join(sentences[:6])[:400]
    rows.append({"pred": corrupt_chars(rng, long_gt, 0.1), "gt": long_gt})
    rows.append({"pred": long_gt.upper(), "gt": long_gt})
    for a, b in [("straße", "STRASSE"), ("ΟΔΟΣ", "οδος"), ("ΟΔΟΣ", "οδοσ"), ("İstanbul", "istanbul"),
                 ("\u212aelvin", "kelvin"), ("Ångström", "ångström"), ("阿里巴巴", "阿里巴")]:
        rows.append({"pred": a, "gt": b})
        rows.append({"pred": b, "gt": a})
    return rows


def make_asr(rng, sentences):
    rows = []
    vocab = sorted({w for s in sentences for w in s.split()})
    for i, s in enumerate(sentences[:160]):
        g = re.sub(r"[^\w\s']", "", s.lower())
        if i % 19 == 4:
            p = ""
        elif i % 13 == 6:
            p = "  " + g.replace(" ", "   ", 2) + "\t "
        elif i % 11 == 2:
            p = g.replace(" ", "\t", 1)  # a single tab does not split jiwer's words
        else:
            p = corrupt_words(rng, g, vocab, 0.35)
            if i % 3 == 0:
                p = corrupt_chars(rng, p, 0.05)
        rows.append({"pred": p, "gt": g})
    long_g = " ".join(re.sub(r"[^\w\s']", "", s.lower()) for s in sentences[:12])
    rows.append({"pred": corrupt_words(rng, long_g, vocab, 0.2), "gt": long_g})  # > 64 words
    rows.append({"pred": "", "gt": long_g})
    return rows


def read_jsonl(path):
    return [json.loads(line) for line in Path(ROOT / path).read_text(encoding="utf-8").splitlines()
            if line.strip()]


# ---- (b) expected values ------------------------------------------------------------------------

def mmeval_bleu(rows, **kw):
    m = BLEU(**kw)
    m.add([r["pred"] for r in rows], [r["refs"] for r in rows])
    return m.compute()


def sacre_streams(rows):
    k = max(len(r["refs"]) for r in rows)
    return [[r["refs"][j] if j < len(r["refs"]) else None for r in rows] for j in range(k)]


def sacre_bleu(rows, max_ngram_order=4, **kw):
    m = SacreBLEU(max_ngram_order=max_ngram_order, **kw)
    return {"bleu": m.corpus_score([r["pred"] for r in rows], sacre_streams(rows)).score / 100.0}


def mmeval_rouge(rows, **kw):
    m = ROUGE(**kw)
    m.add([r["pred"] for r in rows], [r["refs"] for r in rows])
    return m.compute()


def mmeval_pairs(cls, rows, **kw):
    m = cls(**kw)
    m.add([r["pred"] for r in rows], [r["gt"] for r in rows])
    return m.compute()


def jiwer_rate(fn, rows):
    return float(fn([r["gt"] for r in rows], [r["pred"] for r in rows]))


def cases(files):
    out = []

    def case(name, metric, params, data, expected, call):
        out.append({"name": name, "metric": metric, "params": params, "data": files[data],
                    "expected": expected, "calls": {k: call for k in expected}})

    mt, zh, ocr, asr = (read_jsonl(files[k]) for k in ("mt", "mt_zh", "ocr", "asr"))
    R = "with preds = [r['pred'] for r in rows], refs = [r['refs'] for r in rows] of "
    # BLEU, mmeval
    for name, params, kw in [
            ("bleu_mmeval_default", {}, {}),
            ("bleu_mmeval_smooth", {"smooth": True}, {"smooth": True}),
            ("bleu_mmeval_n2_weights", {"n_gram": 2, "ngram_weights": [0.7, 0.3]},
             {"n_gram": 2, "ngram_weights": [0.7, 0.3]}),
            ("bleu_mmeval_n6", {"n_gram": 6, "smooth": True}, {"n_gram": 6, "smooth": True}),
            ("bleu_mmeval_en", {"tokenizer": "en"}, {"tokenizer_fn": "en"}),
            ("bleu_mmeval_cn", {"tokenizer": "cn"}, {"tokenizer_fn": "cn"})]:
        case(name, "BLEU", params, "mt", mmeval_bleu(mt, **kw),
             f"mmeval.metrics.BLEU(**{kw!r}); add(preds, refs); compute() " + R + "mt.jsonl")
    case("bleu_mmeval_auto_cn", "BLEU", {"smooth": True}, "mt_zh",
         mmeval_bleu(zh, smooth=True),
         "mmeval.metrics.BLEU(smooth=True); add(preds, refs); compute() " + R + "mt_zh.jsonl")
    # BLEU, sacrebleu
    for name, params, kw in [
            ("bleu_sacre_default", {}, {}),
            ("bleu_sacre_none_floor", {"tokenizer": "none", "smooth_method": "floor"},
             {"tokenize": "none", "smooth_method": "floor"}),
            ("bleu_sacre_intl_addk", {"tokenizer": "intl", "smooth_method": "add-k",
                                      "smooth_value": 0.5},
             {"tokenize": "intl", "smooth_method": "add-k", "smooth_value": 0.5}),
            ("bleu_sacre_char_lower", {"tokenizer": "char", "lowercase": True},
             {"tokenize": "char", "lowercase": True}),
            ("bleu_sacre_13a_none_eff", {"smooth_method": "none", "use_effective_order": True,
                                         "lowercase": True},
             {"smooth_method": "none", "effective_order": True, "lowercase": True}),
            ("bleu_sacre_n2", {"n_gram": 2}, {"max_ngram_order": 2})]:
        params = {"convention": "sacrebleu", **params}
        case(name, "BLEU", params, "mt", sacre_bleu(mt, **kw),
             f"sacrebleu.metrics.BLEU(**{kw!r}).corpus_score(preds, ref_streams).score / 100 "
             "(ref_streams: the references as streams, padded with None) " + R + "mt.jsonl")
    case("bleu_sacre_zh_intl", "BLEU", {"convention": "sacrebleu", "tokenizer": "intl"}, "mt_zh",
         {"bleu": sacrebleu.corpus_bleu([r["pred"] for r in zh], sacre_streams(zh),
                                        tokenize="intl").score / 100.0},
         "sacrebleu.corpus_bleu(preds, ref_streams, tokenize='intl').score / 100 " + R +
         "mt_zh.jsonl")
    # ROUGE
    for name, params, kw, rows, data in [
            ("rouge_default", {}, {}, mt, "mt"),
            ("rouge_avg", {"accumulate": "avg"}, {"accumulate": "avg"}, mt, "mt"),
            ("rouge_keys_case", {"rouge_keys": [1, 3, 4, "L"], "lowercase": False},
             {"rouge_keys": [1, 3, 4, "L"], "lowercase": False}, mt, "mt"),
            ("rouge_cn", {"tokenizer": "cn", "rouge_keys": "L"},
             {"tokenizer": "cn", "rouge_keys": "L"}, mt, "mt"),
            ("rouge_auto_cn", {"rouge_keys": [1, 2, "L"]}, {"rouge_keys": [1, 2, "L"]}, zh,
             "mt_zh")]:
        case(name, "ROUGE", params, data, mmeval_rouge(rows, **kw),
             f"mmeval.metrics.ROUGE(**{kw!r}); add(preds, refs); compute() (one process, one "
             f"add: divides by the true sample count) " + R + f"{data}.jsonl")
    P = " with preds = [r['pred'] ...], gts = [r['gt'] ...] of "
    for name, params, kw in [
            ("word_accuracy_default", {}, {}),
            ("word_accuracy_all", {"mode": ["exact", "ignore_case", "ignore_case_symbol"]},
             {"mode": ["exact", "ignore_case", "ignore_case_symbol"]}),
            ("word_accuracy_letters", {"mode": ["ignore_case_symbol"],
                                       "invalid_symbol": "[^a-z]"},
             {"mode": ["ignore_case_symbol"], "invalid_symbol": "[^a-z]"})]:
        case(name, "WordAccuracy", params, "ocr", mmeval_pairs(WordAccuracy, ocr, **kw),
             f"mmeval.metrics.WordAccuracy(**{kw!r}); add(preds, gts); compute()" + P +
             "ocr.jsonl")
    for name, params, kw in [
            ("char_default", {}, {}),
            ("char_upper", {"letter_case": "upper"}, {"letter_case": "upper"}),
            ("char_lower_space", {"letter_case": "lower", "invalid_symbol": "\\s"},
             {"letter_case": "lower", "invalid_symbol": "\\s"})]:
        case(name, "CharRecallPrecision", params, "ocr",
             mmeval_pairs(CharRecallPrecision, ocr, **kw),
             f"mmeval.metrics.CharRecallPrecision(**{kw!r}); add(preds, gts); compute()" + P +
             "ocr.jsonl")
    case("wer", "WER", {}, "asr", {"wer": jiwer_rate(jiwer.wer, asr)},
         "float(jiwer.wer(gts, preds))" + P + "asr.jsonl")
    case("cer", "CER", {}, "asr", {"cer": jiwer_rate(jiwer.cer, asr)},
         "float(jiwer.cer(gts, preds))" + P + "asr.jsonl")
    case("wer_ocr", "WER", {}, "ocr", {"wer": jiwer_rate(jiwer.wer, ocr)},
         "float(jiwer.wer(gts, preds))" + P + "ocr.jsonl")
    case("cer_ocr", "CER", {}, "ocr", {"cer": jiwer_rate(jiwer.cer, ocr)},
         "float(jiwer.cer(gts, preds))" + P + "ocr.jsonl")
    return out


# ---- (c) the example ------------------------------------------------------------------------------

def make_example(rng, sentences):
    """Translation-like data per line: id, hypothesis, references (1 to 3; the first is the
    original sentence), reference (the original sentence alone, for WER/CER), and ocr: {pred, gt}
    (the sentence's first word, read with typos)."""
    vocab = sorted({w for s in sentences for w in s.split()})
    rows = []
    for i, s in enumerate(sentences[:300]):
        nrefs = 1 + i % 3
        refs = [s] + [corrupt_words(rng, s, vocab, 0.25) for _ in range(nrefs - 1)]
        hyp = corrupt_words(rng, s, vocab, 0.3)
        rows.append({"id": i, "hypothesis": hyp, "references": refs, "reference": s,
                     "ocr": {"pred": corrupt_chars(rng, s.split()[0], 0.15), "gt": s.split()[0]}})
    return rows


def example_results(rows):
    preds = [r["hypothesis"] for r in rows]
    refs = [r["references"] for r in rows]
    gts = [r["reference"] for r in rows]
    opred = [r["ocr"]["pred"] for r in rows]
    ogt = [r["ocr"]["gt"] for r in rows]
    res, calls = {}, {}
    m = BLEU()
    m.add(preds, refs)
    res["BLEU"] = m.compute()
    calls["BLEU"] = "mmeval.metrics.BLEU(); add(hypothesis, references); compute()"
    res["sacreBLEU"] = {"bleu": sacrebleu.corpus_bleu(
        preds, sacre_streams([{"refs": r} for r in refs])).score / 100.0}
    calls["sacreBLEU"] = "sacrebleu.corpus_bleu(hypothesis, reference streams).score / 100"
    m = ROUGE()
    m.add(preds, refs)
    res["ROUGE"] = m.compute()
    calls["ROUGE"] = "mmeval.metrics.ROUGE(); add(hypothesis, references); compute()"
    res["WER"] = {"wer": float(jiwer.wer(gts, preds))}
    calls["WER"] = "jiwer.wer(reference, hypothesis)"
    res["CER"] = {"cer": float(jiwer.cer(gts, preds))}
    calls["CER"] = "jiwer.cer(reference, hypothesis)"
    m = WordAccuracy(mode=["exact", "ignore_case", "ignore_case_symbol"])
    m.add(opred, ogt)
    res["WordAccuracy"] = m.compute()
    calls["WordAccuracy"] = "mmeval.metrics.WordAccuracy(mode=[all three]); add(ocr.pred, ocr.gt)"
    m = CharRecallPrecision()
    m.add(opred, ogt)
    res["CharRecallPrecision"] = m.compute()
    calls["CharRecallPrecision"] = "mmeval.metrics.CharRecallPrecision(); add(ocr.pred, ocr.gt)"
    return res, calls


def main():
    rng = random.Random(20240611)
    en = english_sentences()
    cjk = cjk_sentences()
    assert len(en) >= 150, len(en)
    assert len(cjk) >= 4, cjk
    mixed = en[:120] + cjk + UNICODE_EXTRA + en[120:150]
    files = {
        "mt": write_jsonl(DATA / "mt.jsonl", make_mt(rng, mixed, len(mixed))),
        "mt_zh": write_jsonl(DATA / "mt_zh.jsonl",
                             make_mt(rng, cjk + UNICODE_EXTRA + en[:20], 30, first_cjk=True)),
        "ocr": write_jsonl(DATA / "ocr.jsonl", make_ocr(rng, en + UNICODE_EXTRA + cjk)),
        "asr": write_jsonl(DATA / "asr.jsonl", make_asr(rng, en[10:] + UNICODE_EXTRA)),
    }
    # A long reference (>= 200 tokens: difflib's autojunk in ROUGE-L) in the mt data.
    mt = read_jsonl(files["mt"])
    long_ref = " ".join(en[:12])
    mt.append({"pred": corrupt_words(rng, long_ref, sorted(set(long_ref.split())), 0.2),
               "refs": [long_ref, en[0]]})
    write_jsonl(DATA / "mt.jsonl", mt)

    ex_rows = make_example(random.Random(7), en)
    ex_path = write_jsonl(EXAMPLE / "translations.jsonl", ex_rows)
    ex_res, ex_calls = example_results(ex_rows)

    doc = {
        "generator": "tests/reference/text.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__, "sacrebleu": sacrebleu.__version__,
                     "jiwer": "4.0.0"},
        "notes": "Values are fractions: sacrebleu's score / 100. mmeval runs on the whole data in "
                 "one process (one add() call). Inputs: pred = the 'pred' strings, refs = the "
                 "'refs' lists, gt = the 'gt' strings of each line.",
        "cases": cases(files),
        "example": {"config": "configs/examples/text.yaml", "data": ex_path, "samples": len(ex_rows), "results": ex_res,
                    "calls": ex_calls},
    }
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {rel(OUT)}: {len(doc['cases'])} cases")


if __name__ == "__main__":
    main()
