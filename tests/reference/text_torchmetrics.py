#!/usr/bin/env python3
"""Reference data and expected values for the torchmetrics-named text metrics of plugins/text:
CHRFScore, TranslationEditRate, EditDistance, ExtendedEditDistance, MatchErrorRate,
WordInfoLost, WordInfoPreserved and SQuAD.

(a) Writes small test datasets to tests/data/text_torchmetrics/*.jsonl, deterministically (fixed
    seeds), from the sentences tests/reference/text.py uses (licence texts, nltk's and rich's
    CJK samples, its Unicode extras) plus Japanese and Chinese lines for TER's asian_support
    and EED's 'ja', corrupted deterministically (dropped, swapped, substituted words, typos,
    case changes), with empty hypotheses, empty references, tabs and runs of spaces:
      mt.jsonl     {"preds": str, "target": [str, ...]}  CHRFScore, TranslationEditRate, EED
      cjk.jsonl    {"preds": str, "target": [str, ...]}  the same with CJK text
      asr.jsonl    {"preds": str, "target": str}         MER, WIL, WIP, EditDistance
      squad.jsonl  {"preds": str, "target": [str, ...]}  SQuAD (several gold answers)
(b) Writes tests/reference/expected_text_torchmetrics.json: per case the metric, its tally
    parameters, its data file, the expected values, the exact reference call and the versions;
    and, where a second library computes the metric, its value ("cross_check") and the relative
    difference.
(c) Writes configs/examples/data/text_torchmetrics/eval.jsonl and the expected results of
    configs/examples/text_torchmetrics.yaml (section "example").

References: sacrebleu 2.6.0 (chrF, TER: corpus scores / 100), jiwer 4.0.0 (MER, WIL, WIP),
torchmetrics 1.9.0 (EditDistance, ExtendedEditDistance, SQuAD / 100). torchmetrics runs in
.venv-torch (a subprocess of this script) with torch's default dtype float64, so its sums and
scores are float64 (it computes in float32 otherwise).

Run from the repository root, in the reference environment:

    .venv-ref/bin/python tests/reference/text_torchmetrics.py
"""

import json
import platform
import random
import re
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jiwer
import numpy as np
import rapidfuzz
import sacrebleu
from sacrebleu.metrics import CHRF, TER

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
from text import (UNICODE_EXTRA, cjk_sentences, corrupt_chars, corrupt_words,  # noqa: E402
                  english_sentences, write_jsonl)

DATA = ROOT / "tests" / "data" / "text_torchmetrics"
OUT = ROOT / "tests" / "reference" / "expected_text_torchmetrics.json"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "text_torchmetrics"
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"


def rel(path):
    return str(Path(path).relative_to(ROOT))


def read_jsonl(path):
    return [json.loads(line) for line in Path(ROOT / path).read_text(encoding="utf-8").splitlines()
            if line.strip()]


# ---- (a) data -----------------------------------------------------------------------------------

JA_ZH = [
    "東京は日本の首都です。",
    "私は毎朝コーヒーを飲みます、そして新聞を読みます。",
    "ｶﾀｶﾅの半角文字とＡＢＣ全角英字は正規化されます。",
    "今日は天気がいいですね！散歩に行きましょう？",
    "这是一个测试句子，用于评估翻译质量。",
    "我们明天去北京参观故宫。",
    "机器翻译的质量越来越好了（但仍需改进）。",
    "ひらがなとカタカナと漢字が混ざった文です。",
]


def make_mt(rng, sentences, n):
    vocab = sorted({w for s in sentences for w in s.split()})
    rows = []
    for i in range(n):
        s = sentences[i % len(sentences)]
        nrefs = 1 + (i % 4 if i % 5 else 0)
        refs = [s] + [corrupt_words(rng, s, vocab, 0.3) for _ in range(nrefs - 1)]
        rng.shuffle(refs)
        if i % 23 == 7:
            pred = ""
        elif i % 31 == 11:
            pred = s
        elif rng.random() < 0.6:
            pred = corrupt_words(rng, s, vocab, 0.4)
        else:
            pred = corrupt_chars(rng, corrupt_words(rng, s, vocab, 0.2), 0.05)
        if i % 17 == 3:
            pred = "  " + pred + " \t"
        if i % 29 == 13:
            refs = [""] + refs[1:]  # an empty reference
        rows.append({"preds": pred, "target": refs})
    # Long lines: a block moved further than one shift window (50 words), beam edges (a length
    # ratio above 50).
    long_ref = " ".join(sentences[:3])
    rows.append({"preds": corrupt_words(rng, long_ref, vocab, 0.3), "target": [long_ref]})
    words = long_ref.split()
    rows.append({"preds": " ".join(words[12:] + words[:12]), "target": [long_ref]})
    rows.append({"preds": words[3], "target": [long_ref]})
    rows.append({"preds": "x", "target": [""]})
    return rows


def make_cjk(rng, lines):
    rows = []
    for i, s in enumerate(lines * 3):
        chars = list(s)
        if i % 3 == 1:
            j = rng.randrange(len(chars))
            chars[j] = rng.choice("的了是在我有一")
        elif i % 3 == 2:
            del chars[rng.randrange(len(chars))]
            chars.insert(rng.randrange(len(chars)), "。")
        pred = "".join(chars)
        if i % 4 == 0:
            pred = " ".join(pred[k:k + 3] for k in range(0, len(pred), 3))
        rows.append({"preds": pred, "target": [s, s.replace("。", "！")] if i % 2 else [s]})
    return rows


def make_asr(rng, sentences):
    rows = []
    vocab = sorted({w for s in sentences for w in s.split()})
    for i, s in enumerate(sentences[:90]):
        g = re.sub(r"[^\w\s']", "", s.lower())
        if i % 19 == 4:
            p = ""
        elif i % 13 == 6:
            p = "  " + g.replace(" ", "   ", 2) + "\t "
        elif i % 11 == 2:
            p = g.replace(" ", "\t", 1)
        else:
            p = corrupt_words(rng, g, vocab, 0.35)
            if i % 3 == 0:
                p = corrupt_chars(rng, p, 0.05)
        if i % 23 == 9:
            g = ""  # an empty reference
        rows.append({"preds": p, "target": g})
    long_g = " ".join(re.sub(r"[^\w\s']", "", s.lower()) for s in sentences[:10])
    rows.append({"preds": corrupt_words(rng, long_g, vocab, 0.2), "target": long_g})
    rows.append({"preds": "b c d", "target": "a b c"})
    rows.append({"preds": "", "target": ""})
    return rows


def make_squad(rng, sentences):
    rows = []
    for i, s in enumerate(sentences[:120]):
        words = s.split()
        a = rng.randrange(0, max(1, len(words) - 4))
        k = rng.randint(1, 4)
        gold = " ".join(words[a:a + k])
        golds = [gold]
        if i % 2:
            golds.append(" ".join(words[max(0, a - 1):a + k]))
        if i % 3 == 0:
            golds.append("the " + gold.upper() + ".")
        r = rng.random()
        if i % 17 == 5:
            pred = ""
        elif r < 0.25:
            pred = gold
        elif r < 0.4:
            pred = "The " + gold.lower() + "!"
        elif r < 0.7:
            pred = " ".join(words[max(0, a - rng.randint(0, 2)):a + k + rng.randint(0, 3)])
        elif r < 0.85:
            pred = " ".join(rng.sample(words, min(len(words), k + 1)))
        else:
            pred = corrupt_chars(rng, gold, 0.2)
        rows.append({"preds": pred, "target": golds})
    rows.append({"preds": "a an the", "target": ["The", "..."]})  # both normalise to nothing
    rows.append({"preds": "Straße café", "target": ["STRASSE Café", "strasse"]})
    return rows


# ---- torchmetrics, in its own environment ----------------------------------------------------------

TORCH_RUNNER = r"""
import json, sys
import torch
torch.set_default_dtype(torch.float64)
import torchmetrics
from torchmetrics import text as T
jobs = json.load(sys.stdin)
out = []
for j in jobs:
    if j["cls"] == "SQuAD":
        # The functional form: the class keeps its sums in float32 (its states' dtype).
        from torchmetrics.functional.text import squad
        preds = [{"prediction_text": p, "id": str(i)} for i, p in enumerate(j["preds"])]
        target = [{"answers": {"text": t, "answer_start": [0] * len(t)}, "id": str(i)}
                  for i, t in enumerate(j["target"])]
        v = squad(preds, target)
    else:
        m = getattr(T, j["cls"])(**j["kwargs"])
        m.update(j["preds"], j["target"])
        v = m.compute()
    if isinstance(v, dict):
        out.append({k: float(x) for k, x in v.items()})
    elif v.ndim == 0:
        out.append(float(v) if v.is_floating_point() else int(v))
    else:
        out.append([int(x) for x in v.tolist()])
print(json.dumps({"version": torchmetrics.__version__, "torch": torch.__version__, "out": out}))
"""


def torchmetrics_run(jobs):
    r = subprocess.run([str(TORCH_PY), "-c", TORCH_RUNNER], input=json.dumps(jobs),
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


# ---- references ----------------------------------------------------------------------------------

def ref_streams(rows):
    k = max(len(r["target"]) for r in rows)
    return [[r["target"][j] if j < len(r["target"]) else None for r in rows] for j in range(k)]


def sacre_chrf(rows, **kw):
    return CHRF(**kw).corpus_score([r["preds"] for r in rows], ref_streams(rows)).score / 100.0


def sacre_ter(rows, **kw):
    return TER(**kw).corpus_score([r["preds"] for r in rows], ref_streams(rows)).score / 100.0


def jiwer_words(rows):
    return jiwer.process_words([r["target"] for r in rows], [r["preds"] for r in rows])


def py_editops_counts(ref, hyp):
    """rapidfuzz's Levenshtein.editops by its pure-Python algorithm (Levenshtein_py.editops:
    Hyyro's bit matrix, common affix removed, back-trace preferring deletion, then insertion):
    the alignment tally reproduces. Returns (S, D, I)."""
    ops = rapidfuzz.distance.Levenshtein_py.editops(ref, hyp)
    c = Counter(op.tag for op in ops)
    return c["replace"], c["delete"], c["insert"]


def squad_v11(rows):
    """The official SQuAD v1.1 evaluation logic (evaluate-v1.1.py), transcribed."""
    def normalize_answer(s):
        s = s.lower()
        s = "".join(ch for ch in s if ch not in set(string.punctuation))
        s = re.sub(r"\b(a|an|the)\b", " ", s)
        return " ".join(s.split())

    def f1_score(prediction, ground_truth):
        p = normalize_answer(prediction).split()
        g = normalize_answer(ground_truth).split()
        num_same = sum((Counter(p) & Counter(g)).values())
        if num_same == 0:
            return 0
        precision, recall = 1.0 * num_same / len(p), 1.0 * num_same / len(g)
        return (2 * precision * recall) / (precision + recall)

    em = f1 = 0.0
    for r in rows:
        em += max(float(normalize_answer(r["preds"]) == normalize_answer(t)) for t in r["target"])
        f1 += max(f1_score(r["preds"], t) for t in r["target"])
    return {"exact_match": em / len(rows), "f1": f1 / len(rows)}


def reldiff(a, b):
    if isinstance(a, dict):
        return max(reldiff(a[k], b[k]) for k in a)
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def cases(files):
    out = []
    tm_jobs = []

    def case(name, metric, params, data, expected, call, tm=None, cross_call=None):
        c = {"name": name, "metric": metric, "params": params, "data": files[data],
             "expected": expected, "call": call}
        out.append(c)
        if tm is not None:
            tm_jobs.append((c, tm, cross_call))

    rows = {k: read_jsonl(v) for k, v in files.items()}
    P = " with preds = [r['preds'] ...], target = [r['target'] ...] of "
    S = (" with ref_streams: the references as streams, padded with None" + P)

    # CHRFScore: sacrebleu's CHRF corpus score / 100.
    for name, params, kw, tmkw in [
            ("chrf_default", {}, {"char_order": 6, "word_order": 2, "beta": 2,
                                  "eps_smoothing": True}, {}),
            ("chrf_plain", {"n_word_order": 0}, {"char_order": 6, "word_order": 0, "beta": 2,
                                                 "eps_smoothing": True}, {"n_word_order": 0}),
            ("chrf_lower_space_beta1", {"lowercase": True, "whitespace": True, "beta": 1.0,
                                        "n_char_order": 4},
             {"char_order": 4, "word_order": 2, "beta": 1, "lowercase": True,
              "whitespace": True, "eps_smoothing": True},
             {"lowercase": True, "whitespace": True, "beta": 1.0, "n_char_order": 4}),
            ("chrf_effective_order", {"eps_smoothing": False},
             {"char_order": 6, "word_order": 2, "beta": 2, "eps_smoothing": False}, None)]:
        for data in ("mt", "cjk"):
            case(f"{name}_{data}", "CHRFScore", params, data,
                 {"chrf_score": sacre_chrf(rows[data], **kw)},
                 f"sacrebleu.metrics.CHRF(**{kw!r}).corpus_score(preds, ref_streams).score / 100" +
                 S + f"{data}.jsonl",
                 None if tmkw is None else {"cls": "CHRFScore", "kwargs": tmkw},
                 f"torchmetrics.text.CHRFScore(**{tmkw!r}); update(preds, target); compute()")
    # TranslationEditRate: sacrebleu's TER corpus score / 100.
    for name, params, kw, data in [
            ("ter_default", {}, {}, "mt"),
            ("ter_case_sensitive", {"lowercase": False}, {"case_sensitive": True}, "mt"),
            ("ter_normalize", {"normalize": True}, {"normalized": True}, "mt"),
            ("ter_no_punct", {"no_punctuation": True}, {"no_punct": True}, "mt"),
            ("ter_asian", {"normalize": True, "asian_support": True},
             {"normalized": True, "asian_support": True}, "cjk"),
            ("ter_asian_no_punct", {"no_punctuation": True, "asian_support": True},
             {"no_punct": True, "asian_support": True}, "cjk"),
            ("ter_cjk_plain", {}, {}, "cjk")]:
        tmkw = dict(params)
        case(name, "TranslationEditRate", params, data,
             {"translation_edit_rate": sacre_ter(rows[data], **kw)},
             f"sacrebleu.metrics.TER(**{kw!r}).corpus_score(preds, ref_streams).score / 100" + S +
             f"{data}.jsonl", {"cls": "TranslationEditRate", "kwargs": tmkw},
             f"torchmetrics.text.TranslationEditRate(**{tmkw!r}); update(preds, target); "
             "compute()")
    # MER, WIL, WIP: jiwer.
    asr = rows["asr"]
    w = jiwer_words(asr)
    J = " with refs = [r['target'] ...], hyps = [r['preds'] ...] of asr.jsonl"
    for metric, key, value, fn, cls in [
            ("MatchErrorRate", "match_error_rate", w.mer, "mer", "MatchErrorRate"),
            ("WordInfoLost", "word_information_lost", w.wil, "wil", "WordInfoLost"),
            ("WordInfoPreserved", "word_information_preserved", w.wip, "wip",
             "WordInfoPreserved")]:
        case(fn, metric, {}, "asr", {key: float(value)}, f"float(jiwer.{fn}(refs, hyps))" + J,
             {"cls": cls, "kwargs": {}},
             f"torchmetrics.text.{cls}(); update(preds, target); compute()")
    # The same on the corpus without the ambiguous pair 'b c d' / 'a b c' ...
    # EditDistance: torchmetrics (the only library with its beam).
    for name, params, data in [
            ("edit_distance_mean", {}, "asr"),
            ("edit_distance_sum_cost2", {"substitution_cost": 2, "reduction": "sum"}, "asr"),
            ("edit_distance_none", {"reduction": "none"}, "asr"),
            ("edit_distance_cost0_mt", {"substitution_cost": 0}, "mt1")]:
        case(name, "EditDistance", params, data, None,
             f"torchmetrics.text.EditDistance(**{params!r}); update(preds, target); compute()" +
             P + f"{files[data]}", {"cls": "EditDistance", "kwargs": params, "primary": True})
    # ExtendedEditDistance: torchmetrics.
    for name, params, data in [
            ("eed_default", {}, "mt"),
            ("eed_params", {"alpha": 1.5, "rho": 0.5, "deletion": 0.4, "insertion": 0.7}, "mt"),
            ("eed_ja", {"language": "ja"}, "cjk")]:
        case(name, "ExtendedEditDistance", params, data, None,
             f"torchmetrics.text.ExtendedEditDistance(**{params!r}); update(preds, target); "
             "compute()" + P + f"{files[data]}",
             {"cls": "ExtendedEditDistance", "kwargs": params, "primary": True})
    # SQuAD: torchmetrics / 100, cross-checked with the official v1.1 logic.
    case("squad", "SQuAD", {}, "squad", None,
         "torchmetrics.functional.text.squad([{'prediction_text': p, 'id': str(i)}, ...], "
         "[{'answers': {'text': golds, 'answer_start': [0, ...]}, 'id': str(i)}, ...]) / 100 "
         "(the functional form: the SQuAD class sums in float32)" + P +
         "squad.jsonl", {"cls": "SQuAD", "kwargs": {}, "primary": True})

    jobs = []
    for c, tm, _ in tm_jobs:
        r = rows[c["data"].split("/")[-1].split(".")[0]]
        jobs.append({"cls": tm["cls"], "kwargs": tm["kwargs"], "preds": [x["preds"] for x in r],
                     "target": [x["target"] for x in r]})
    res = torchmetrics_run(jobs)
    key = {"CHRFScore": "chrf_score", "TranslationEditRate": "translation_edit_rate",
           "EditDistance": "edit_distance", "ExtendedEditDistance": "extended_edit_distance",
           "MatchErrorRate": "match_error_rate", "WordInfoLost": "word_information_lost",
           "WordInfoPreserved": "word_information_preserved"}
    for (c, tm, cross_call), v in zip(tm_jobs, res["out"]):
        if tm["cls"] == "SQuAD":
            v = {k: x / 100.0 for k, x in v.items()}
        else:
            v = {key[tm["cls"]]: v}
        if tm.get("primary"):
            c["expected"] = v
        else:
            c["cross_check"] = {"value": v, "call": cross_call,
                                "relative_difference": reldiff(c["expected"], v)}
        if tm["cls"] == "SQuAD":
            off = squad_v11(rows["squad"])
            c["cross_check"] = {"value": off, "call": "the official SQuAD v1.1 evaluation logic "
                                "(evaluate-v1.1.py) transcribed in this script, / 100",
                                "relative_difference": reldiff(v, off)}
    return out, res


# ---- (c) the example ------------------------------------------------------------------------------

def make_example(rng, sentences):
    """An evaluation file with a translation and a transcription per line."""
    vocab = sorted({w for s in sentences for w in s.split()})
    rows = []
    for i, s in enumerate(sentences[:120]):
        refs = [s] + [corrupt_words(rng, s, vocab, 0.25) for _ in range(i % 3)]
        g = re.sub(r"[^\w\s']", "", s.lower())
        rows.append({"id": i, "translation": corrupt_words(rng, s, vocab, 0.3),
                     "references": refs, "transcript": corrupt_words(rng, g, vocab, 0.2),
                     "spoken": g})
    return rows


def main():
    rng = random.Random(20261127)
    en = english_sentences()
    cjk = cjk_sentences()
    mixed = en[:40] + cjk[:4] + UNICODE_EXTRA
    files = {
        "mt": write_jsonl(DATA / "mt.jsonl", make_mt(rng, mixed, len(mixed))),
        "cjk": write_jsonl(DATA / "cjk.jsonl", make_cjk(rng, JA_ZH)),
        "asr": write_jsonl(DATA / "asr.jsonl", make_asr(rng, en[40:] + UNICODE_EXTRA)),
        "squad": write_jsonl(DATA / "squad.jsonl", make_squad(rng, en[60:] + UNICODE_EXTRA)),
    }
    # EditDistance on pairs of single strings: the first reference of each mt line.
    files["mt1"] = write_jsonl(DATA / "mt1.jsonl",
                               [{"preds": r["preds"], "target": r["target"][0]}
                                for r in read_jsonl(files["mt"])])
    # Check that rapidfuzz's compiled opcodes agree with its pure-Python algorithm on this data
    # (tally implements the latter's back-trace).
    asr = read_jsonl(files["asr"])
    for r in asr:
        ref = jiwer.wer_default(r["target"]) if r["target"] else [[]]
        hyp = jiwer.wer_default(r["preds"]) if r["preds"] else [[]]
        a, b = ref[0] if ref else [], hyp[0] if hyp else []
        fast = Counter(op.tag for op in rapidfuzz.distance.Levenshtein.editops(a, b))
        assert py_editops_counts(a, b) == (fast["replace"], fast["delete"], fast["insert"]), r

    all_cases, tm = cases(files)

    ex_rows = make_example(random.Random(11), en)
    ex_path = write_jsonl(EXAMPLE / "eval.jsonl", ex_rows)
    mt = [{"preds": r["translation"], "target": r["references"]} for r in ex_rows]
    sp = [{"preds": r["transcript"], "target": r["spoken"]} for r in ex_rows]
    w = jiwer_words(sp)
    ex_jobs = [{"cls": "ExtendedEditDistance", "kwargs": {}, "preds": [r["preds"] for r in mt],
                "target": [r["target"] for r in mt]},
               {"cls": "EditDistance", "kwargs": {}, "preds": [r["preds"] for r in sp],
                "target": [r["target"] for r in sp]}]
    ex_tm = torchmetrics_run(ex_jobs)["out"]
    ex_res = {
        "CHRFScore": {"chrf_score": sacre_chrf(mt, word_order=2, eps_smoothing=True)},
        "TranslationEditRate": {"translation_edit_rate": sacre_ter(mt)},
        "ExtendedEditDistance": {"extended_edit_distance": ex_tm[0]},
        "MatchErrorRate": {"match_error_rate": float(w.mer)},
        "WordInfoLost": {"word_information_lost": float(w.wil)},
        "WordInfoPreserved": {"word_information_preserved": float(w.wip)},
        "EditDistance": {"edit_distance": ex_tm[1]},
    }
    ex_calls = {
        "CHRFScore": "sacrebleu.metrics.CHRF(word_order=2, eps_smoothing=True).corpus_score("
                     "translation, reference streams).score / 100",
        "TranslationEditRate": "sacrebleu.metrics.TER().corpus_score(translation, reference "
                               "streams).score / 100",
        "ExtendedEditDistance": "torchmetrics.text.ExtendedEditDistance(); update(translation, "
                                "references); compute()",
        "MatchErrorRate": "jiwer.mer(spoken, transcript)",
        "WordInfoLost": "jiwer.wil(spoken, transcript)",
        "WordInfoPreserved": "jiwer.wip(spoken, transcript)",
        "EditDistance": "torchmetrics.text.EditDistance(); update(transcript, spoken); compute()",
    }

    doc = {
        "generator": "tests/reference/text_torchmetrics.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "sacrebleu": sacrebleu.__version__, "jiwer": "4.0.0",
                     "rapidfuzz": rapidfuzz.__version__, "torchmetrics": tm["version"],
                     "torch": tm["torch"]},
        "notes": "Values are fractions: sacrebleu's chrF and TER scores / 100, torchmetrics' SQuAD "
                 "/ 100. Inputs: preds = the 'preds' field, target = the 'target' field of each "
                 "line. torchmetrics ran with torch.set_default_dtype(torch.float64).",
        "cases": all_cases,
        "example": {"config": "configs/examples/text_torchmetrics.yaml", "data": ex_path,
                    "samples": len(ex_rows), "results": ex_res, "calls": ex_calls},
    }
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {rel(OUT)}: {len(all_cases)} cases")
    for c in all_cases:
        if "cross_check" in c:
            print(f"  {c['name']}: cross-check relative difference "
                  f"{c['cross_check']['relative_difference']:.3g}")


if __name__ == "__main__":
    main()
