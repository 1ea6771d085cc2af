"""The language check in front of the diagnosis's English rules (diagnosis/language.py): clearly
non-English questions and answers are named as such, in Latin script and in others; anything that
could be English (short answers, names and titles in other languages, code, numbers, records,
URLs) stays English; and no text of the English data sets is ever called non-English."""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from pathlib import Path

import pytest

from ragmend.diagnosis.language import LanguageCheck, check_language

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")

# HotpotQA-style questions and answers, translated; (language, text).
NON_ENGLISH: list[tuple[str, str]] = [
    ("de", "Wer hat Marvel Comics gegründet?"),
    ("de", "In welchem Jahr wurde die Kalenderhane-Moschee gebaut?"),
    ("de", "Marvel Comics wurde 1939 von Martin Goodman gegründet."),
    ("de", "Die Hauptstadt von Frankreich ist Paris."),
    ("de", "Welcher Fluss fließt durch die Stadt, in der Mozart geboren wurde?"),
    ("fr", "Qui a fondé Marvel Comics ?"),
    ("fr", "Dans quelle ville se trouve la mosquée Kalenderhane ?"),
    ("fr", "Marvel Comics a été fondée en 1939 par Martin Goodman."),
    ("fr", "Quel est le nom de l'université dont le campus principal est à Lawrence ?"),
    ("es", "¿Quién fundó Marvel Comics?"),
    ("es", "¿En qué año se estrenó la película?"),
    ("es", "Marvel Comics fue fundada por Martin Goodman en 1939."),
    ("es", "El director de la película nació en una ciudad de México."),
    ("it", "Chi ha fondato la Marvel Comics?"),
    ("it", "In quale anno è stata costruita la moschea Kalenderhane?"),
    ("it", "La Marvel Comics è stata fondata da Martin Goodman nel 1939."),
    ("pt", "Em que ano foi fundada a Marvel Comics?"),
    ("pt", "A Marvel Comics foi fundada por Martin Goodman em 1939."),
    ("pt", "Qual é o nome da universidade cujo campus principal fica em Lawrence?"),
    ("nl", "Wie heeft Marvel Comics opgericht?"),
    ("nl", "In welk jaar werd de Kalenderhane-moskee gebouwd?"),
    ("nl", "Marvel Comics werd in 1939 door Martin Goodman opgericht."),
    ("sv", "Vem grundade Marvel Comics och när hände det?"),
    ("sv", "I vilken stad ligger Kalenderhane-moskén?"),
    ("sv", "Marvel Comics grundades av Martin Goodman år 1939 och är ett amerikanskt förlag."),
    ("pl", "Kto założył Marvel Comics?"),
    ("pl", "W którym roku zbudowano meczet Kalenderhane?"),
    ("pl", "Marvel Comics zostało założone przez Martina Goodmana w 1939 roku."),
    ("tr", "Marvel Comics hangi yılda ve kim tarafından kuruldu?"),
    ("tr", "Kalenderhane Camii hangi şehirde bulunur?"),
    ("tr", "Marvel Comics, 1939 yılında Martin Goodman tarafından kuruldu."),
    ("id", "Siapa yang mendirikan Marvel Comics?"),
    ("id", "Di kota mana Masjid Kalenderhane berada?"),
    ("id", "Marvel Comics didirikan oleh Martin Goodman pada tahun 1939."),
    ("ro", "În ce an a fost construită moscheea Kalenderhane?"),
    ("ro", "Marvel Comics a fost fondată de Martin Goodman în 1939."),
    ("cs", "Kdo založil Marvel Comics a kdy to bylo?"),
    ("cs", "Marvel Comics bylo založeno Martinem Goodmanem v roce 1939."),
    ("vi", "Ai là người sáng lập Marvel Comics?"),
    ("vi", "Marvel Comics được Martin Goodman thành lập vào năm 1939."),
    ("zh", "谁创立了漫威漫画？"),
    ("zh", "卡伦德哈内清真寺位于哪个城市？"),
    ("zh", "漫威漫画是由马丁·古德曼于1939年创立的。"),
    ("ja", "マーベル・コミックスを設立したのは誰ですか？"),
    ("ja", "カレンデルハネ・モスクはどの都市にありますか？"),
    ("ja", "マーベル・コミックスは1939年にマーティン・グッドマンによって設立されました。"),
    ("ko", "마블 코믹스를 설립한 사람은 누구입니까?"),
    ("ko", "마블 코믹스는 1939년 마틴 굿맨이 설립했습니다."),
    ("ru", "Кто основал Marvel Comics?"),
    ("ru", "В каком городе находится мечеть Календерхане?"),
    ("ru", "Marvel Comics была основана Мартином Гудманом в 1939 году."),
    ("uk", "У якому місті знаходиться мечеть Календерхане?"),
    ("ar", "من أسس مارفل كوميكس؟"),
    ("ar", "تأسست مارفل كوميكس على يد مارتن غودمان في عام 1939."),
    ("fa", "چه کسی مارول کامیکس را تأسیس کرد؟"),
    ("el", "Ποιος ίδρυσε τη Marvel Comics;"),
    ("el", "Η Marvel Comics ιδρύθηκε από τον Μάρτιν Γκούντμαν το 1939."),
    ("he", "מי ייסד את מארוול קומיקס?"),
    ("hi", "मार्वल कॉमिक्स की स्थापना किसने की?"),
    ("hi", "मार्वल कॉमिक्स की स्थापना 1939 में मार्टिन गुडमैन ने की थी।"),
    ("th", "ใครเป็นผู้ก่อตั้งมาร์เวลคอมิกส์"),
]

# English, however short, and with names and titles in other languages inside.
ENGLISH: list[str] = [
    "23",
    "Paris",
    "Yes.",
    "no",
    "Marvel Comics",
    "1990s",
    "4,000,000",
    "The Kalenderhane Mosque is in Istanbul.",
    "Der Spiegel was founded in 1947.",
    "Les Misérables is a musical.",
    "Cien años de soledad is a 1967 novel by Gabriel García Márquez.",
    "The film La vita è bella won three Academy Awards.",
    "La Villette's City des Sciences et de l'Industrie puts the accent on public participation.",
    "He said 'je ne sais pas' and left the room.",
    "The motto of the state is 'Liberté, égalité, fraternité'.",
    "Ich bin ein Berliner is a speech by John F. Kennedy.",
    "Que sera, sera (Whatever Will Be, Will Be) is a 1956 song.",
    "The résumé mentions a fiancé from the façade company.",
    "Tokyo (東京, Tōkyō) is the capital of Japan.",
    "Moscow (Russian: Москва, tr. Moskva, IPA: [mɐskˈva]) is the capital of Russia.",
    "Jay Chou (周杰倫; born 18 January 1979) is a Taiwanese musician.",
    "i think its in paris lol",
]

# Names and titles standing alone: English rules can still compare them with a passage.
NAMES_AND_TITLES: list[str] = [
    "Charles de Gaulle, Simone de Beauvoir, Ludwig van Beethoven, Pedro de la Rosa",
    "Los Angeles, Las Vegas, San Diego, Santa Fe, El Paso",
    "Mensch ärgere Dich nicht",
    "Gesellschaft mit beschränkter Haftung",
    "Ich lasse dich nicht, du segnest mich denn, BWV 157",
    "Le roi malgré lui",
    "Der Templer und die Jüdin",
    "La colpa e la pena",
    "C.R.A.Z.Y.",
    "Kalenderhane Camii",
    "El Niño",
    "周杰倫",
    "我的野蛮女友",
    "千と千尋の神隠し",
    "Лев Толстой",
    "Война и мир",
    "الهجرة إلى الشمال",
]

MACHINE_TEXT: list[str] = [
    "def f(x): return x if x else None",
    "SELECT name, year FROM films WHERE director = 'Luc Besson';",
    "https://de.wikipedia.org/wiki/Der_Spiegel",
    "https://es.wikipedia.org/wiki/La_casa_de_papel_(serie_de_televisión)",
    "| Jahr | Titel | Regie |\n| 1997 | Das fünfte Element | Luc Besson |",
    "{'name': 'La Casa de Toño', 'city': 'Los Angeles', 'categories': 'Restaurantes, Mexican'}",
    "73520f08-c78c-4c98-bf72-2df71b1e83d2",
    "contact: info@la-casa-de-papel.es",
]


def test_a_german_question_is_not_english() -> None:
    check = check_language("Wer hat Marvel Comics gegründet?")
    assert check == LanguageCheck("de", False, "the text reads as German (de)")


@pytest.mark.parametrize(("language", "text"), NON_ENGLISH)
def test_questions_and_answers_in_other_languages_are_not_english(language: str, text: str) -> None:
    check = check_language(text)
    assert not check.english
    assert check.language == language
    assert check.reason is not None and f"({language})" in check.reason


def test_the_examples_cover_many_languages_and_scripts() -> None:
    assert len({language for language, _ in NON_ENGLISH}) >= 20


@pytest.mark.parametrize("text", ENGLISH)
def test_short_answers_and_foreign_names_in_english_sentences_are_english(text: str) -> None:
    check = check_language(text)
    assert check.english and check.reason is None


@pytest.mark.parametrize("text", NAMES_AND_TITLES)
def test_names_and_titles_in_other_languages_standing_alone_are_english(text: str) -> None:
    assert check_language(text).english


@pytest.mark.parametrize("text", MACHINE_TEXT)
def test_code_urls_identifiers_and_records_are_english(text: str) -> None:
    assert check_language(text).english


def test_a_query_typed_in_lower_case_without_a_question_mark_still_reads_as_its_language() -> None:
    assert check_language("wer hat marvel comics gegründet").language == "de"
    assert check_language("quién fundó marvel comics").language == "es"


def test_longer_non_english_passages_are_not_english() -> None:
    passages = {
        "de": "Die Stadt liegt am Rhein und ist für ihren Dom bekannt. Sie hat etwa eine Million Einwohner.",
        "fr": "Le film est sorti en 1997 et a été un grand succès. Il a remporté plusieurs prix.",
        "ru": "Фильм вышел в 1997 году и имел большой успех.",
        "ja": "映画は1997年に公開され、大成功を収めました。",
    }
    for language, passage in passages.items():
        assert check_language(passage).language == language


def test_mixed_query_and_response_is_not_english_when_either_is() -> None:
    query, answer = "Who founded Marvel Comics?", "Marvel Comics wurde 1939 von Martin Goodman gegründet."
    assert check_language(query, answer) == LanguageCheck("de", False, "text 2 of 2 reads as German (de)")
    assert check_language(
        "¿Quién fundó Marvel Comics?", "Martin Goodman founded it in 1939."
    ) == LanguageCheck("es", False, "text 1 of 2 reads as Spanish (es)")
    # The first non-English text in the order given decides.
    assert check_language("Who?", "Кто основал Marvel Comics?", "谁创立了漫威漫画？").language == "ru"


def test_english_texts_read_as_english_and_bare_names_or_numbers_as_undetermined() -> None:
    assert check_language("Who founded Marvel Comics?", "Martin Goodman") == LanguageCheck("en", True, None)
    assert check_language("Martin Goodman", "1939") == LanguageCheck("und", True, None)
    assert check_language("") == LanguageCheck("und", True, None)
    assert check_language() == LanguageCheck("und", True, None)


def test_the_check_is_a_frozen_value_and_deterministic() -> None:
    check = check_language("Qui a fondé Marvel Comics ?")
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.english = True  # type: ignore[misc]
    assert all(check_language("Qui a fondé Marvel Comics ?") == check for _ in range(3))


def test_a_long_text_is_read_in_linear_time() -> None:
    paragraph = "The Kalenderhane Mosque (Turkish: Kalenderhane Camii) is in Istanbul. " * 300
    started = time.perf_counter()
    assert check_language(paragraph).english
    assert time.perf_counter() - started < 0.5


def test_every_text_of_the_shipped_sample_corpus_and_questions_is_english() -> None:
    texts = []
    for name in ("sample_corpus.jsonl", "sample_questions.jsonl"):
        for line in (REPO / "rag" / "data" / name).read_text().splitlines():
            item = json.loads(line)
            texts += [item[key] for key in ("title", "text", "question", "answer") if item.get(key)]
    flagged = [text for text in texts if not check_language(text).english]
    assert len(texts) > 400 and flagged == []


@needs_data
def test_no_hotpotqa_question_answer_or_paragraph_is_called_non_english() -> None:
    items = json.loads((DATA / "hotpotqa" / "hotpot_dev_distractor_merged.json").read_text())
    texts = []
    for item in items:
        texts += [item["question"], item["answer"]]
        context = item["context"]
        for _, sentences in json.loads(context) if isinstance(context, str) else context:
            texts.append("".join(sentences))
    flagged = [text for text in texts if not check_language(text).english]
    assert len(texts) > 15_000 and flagged == []


@needs_data
def test_no_ragtruth_fever_or_truthfulqa_text_is_called_non_english() -> None:
    texts = []
    for name in ("ragtruth_test_2598.jsonl", "ragtruth_train_sample_391.jsonl"):
        for line in (DATA / "ragtruth" / name).read_text().splitlines():
            item = json.loads(line)
            texts += [item["response"], item.get("question") or "", *item["passages"]]
    for line in (DATA / "fever" / "fever_claims_with_evidence_text.jsonl").read_text().splitlines():
        item = json.loads(line)
        texts += [item["claim"], *(evidence["sentence"] for evidence in item["evidence"])]
    with (DATA / "truthfulqa" / "TruthfulQA.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            texts += [row["Question"], row["Best Answer"], row["Best Incorrect Answer"]]
            texts += row["Correct Answers"].split(";") + row["Incorrect Answers"].split(";")
    flagged = [text[:80] for text in texts if not check_language(text).english]
    assert len(texts) > 20_000 and flagged == []
