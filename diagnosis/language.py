"""Whether a text is English enough for the diagnosis's English rules, by a small built-in rule.

Why: the diagnosis judges answers with English-only means (an English NLI model, English
regexes for names, years, sentences, "yes/no" and question words). On a German question or a
Chinese answer those means give a verdict that says nothing; the diagnosis must say instead that
it could not judge the text. This module only reads; it never translates or judges.

How (deterministic, no model, no dependency; one pass over the words of each text, about
0.2 ms for a 550-character HotpotQA paragraph and 0.03 ms for a question on one CPU core):
- Words are runs of letters (with their combining marks). URLs, e-mail addresses, "e.g."/"i.e."
  and pieces glued to digits ("1990s", "73520f08-c78c") are no words.
- Other scripts: a word counts for its script (Cyrillic, Arabic, Greek, Hebrew, Devanagari,
  Hangul, Thai, ...); Chinese and Japanese by characters. A script reads as a language when
  its words are at least as many as the Latin ones, and its own grammar shows (a function word
  of that language: "кто", "في", "και"; Chinese particles "的 了 是 谁"; four hiragana), or
  there are many of them. A name in parentheses inside an English paragraph ("Moscow
  (Russian: Москва)") or a bare name ("周杰倫", "Лев Толстой") never does.
- Latin script: each word may be evidence for English (its function words; those also common
  in other languages, "a", "in", "was", "no", "also", count half) and for each of 18 Latin-script
  languages (de fr es it pt nl sv da no pl tr id ro cs fi hu vi tl): one of its function words,
  in lower case or opening a sentence, or a lower-case word spelled with that language's
  letters ("gegründet", "fundó"); Spanish "¿" and "¡" count too. Particles of names between
  two capitalised words ("Charles de Gaulle", "Pedro de la Rosa", "Tristan und Isolde") count
  for nothing, so names and titles inside English sentences ("Der Spiegel was founded in
  1947.", "Les Misérables is a musical.") stay English. Text in capitals only is not read.
- A text reads as another Latin-script language only when it is clearly mostly that language:
  at least 4 words (3 when all three are evidence), at least 2 pieces of evidence from 2
  different words, more than twice the English evidence, and at least 15 % of its Latin words.
  A text without a sentence's punctuation (no "?", no "." after a word) that is not typed all
  in lower case may be a name or a title ("Le roi malgré lui", "Mensch ärgere Dich nicht",
  "La aventura de un fotógrafo en La Plata", "Война и мир"), which English rules can still
  compare with a passage: it needs 12 words, 3 pieces of evidence and 40 % of its words (for
  other scripts, more words). Anything else, however short or odd (numbers, code, records, a
  lone name), is English as far as the diagnosis is concerned: english=True is the safe side;
  a false "not English" would silence a diagnosis that could have judged.

`check_language(*texts)` reads each text on its own, in the order given, and returns the first
that reads as another language; a query in English with an answer in French is not English.

Measured (tests/test_language.py has the examples and the data-set checks): no question, answer,
claim, response or passage of HotpotQA dev (distractor), RAGTruth (test 2,598 and train sample),
FEVER (claims with evidence) or TruthfulQA is called non-English; nor is any of 340k held-out
English NLI/FEVER texts but one table fragment of ConjNLI ('1952 Los líos de Elías " 1954.').
Short questions with a single function word ("Quem fundou a Marvel Comics?", "Cine a fondat
Marvel Comics?") are missed: the rule prefers missing a foreign text to silencing an English one.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["LanguageCheck", "check_language"]


@dataclass(frozen=True)
class LanguageCheck:
    """What `check_language` read.

    language: ISO 639-1 code of what it reads ("en", "de", "zh", ...), or "und" when it cannot
    tell (a number, a name, an empty text); english: True when the diagnosis's English rules
    apply (always for "en" and "und"); reason: None when english, else one short line naming
    the text and the language, e.g. "text 2 of 2 reads as German (de)"."""

    language: str
    english: bool
    reason: str | None


LANGUAGE_NAMES: dict[str, str] = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "sv": "Swedish",
    "da": "Danish",
    "no": "Norwegian",
    "pl": "Polish",
    "tr": "Turkish",
    "id": "Indonesian",
    "ro": "Romanian",
    "cs": "Czech",
    "fi": "Finnish",
    "hu": "Hungarian",
    "vi": "Vietnamese",
    "tl": "Tagalog",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "ru": "Russian",
    "uk": "Ukrainian",
    "el": "Greek",
    "ar": "Arabic",
    "fa": "Persian",
    "ur": "Urdu",
    "he": "Hebrew",
    "hi": "Hindi",
    "bn": "Bengali",
    "pa": "Punjabi",
    "gu": "Gujarati",
    "ta": "Tamil",
    "te": "Telugu",
    "kn": "Kannada",
    "ml": "Malayalam",
    "si": "Sinhala",
    "th": "Thai",
    "lo": "Lao",
    "km": "Khmer",
    "my": "Burmese",
    "bo": "Tibetan",
    "ka": "Georgian",
    "hy": "Armenian",
    "am": "Amharic",
}

# ---------------------------------------------------------------------------------------------
# English. Weight 1: words only English uses this much; weight 0.5: English function words that
# are also common words of other languages ("a", "in", "was" (de), "no" (es), "on" (fr), ...).
# "I" counts only in upper case; a lower-case "i" is Italian, Polish, Swedish ...
_ENGLISH_STRONG = frozenset(
    """the of and for with by from that this these those which who whom whose what when where why how
    it its they their them theirs she her hers his him we our ours us you your yours are were be been
    being have had does did not but or than then there here if would could should can may might must
    shall about into onto after before over under between during only such some any all more most
    other another each every both either neither very just yes out up down off again against because
    while although though until since whether my mine itself himself herself themselves ourselves
    is isn aren wasn weren doesn didn wouldn couldn shouldn cannot""".split()  # noqa: SIM905
)
_ENGLISH_HALF = frozenset("a an in on at as so am was will to no me he has do also".split())  # noqa: SIM905

# Function words of Latin-script languages. English function words are removed from every list
# below (a word both languages use is no evidence against English), and so are the common English
# words "son" (es) and "war" (de); common English words such as "car", "come", "men", "plus", "var"
# were never listed. "die", "hat" (de), "door" (nl) and "ha" (it, es) stay: frequent there, rare in
# English, and a single word never decides anything.
_FUNCTION_WORDS: dict[str, str] = {
    "de": """der die das den dem des ein eine einer eines einem einen und ist sind war waren wurde
        wurden wird werden hat haben hatte hatten nicht mit von zu zum zur auf für bei aus nach über
        unter vor durch gegen ohne um wer wen wem wessen wie wo wann warum welche welcher welches
        welchem welchen woher wohin ich du er sie es wir ihr sich auch noch nur schon sehr oder aber
        wenn dass daß ob im vom beim ins als dieser diese dieses diesem kein keine keinen seine sein
        seiner ihre ihren ihrem gibt gab hier dort liegt liegen befindet befinden heißt hieß geboren
        gegründet gründete""",
    "fr": """le la les un une des du de et est sont était étaient ont au aux en dans pour sur avec
        sans sous qui que quoi quel quelle quels quelles où quand comment pourquoi combien ce cette
        ces cet il elle ils elles nous vous je tu ne pas ou mais donc ni leur leurs été être avoir
        fait qu l d c se lui même aussi très entre depuis chez vers y sa ses""",
    "es": """el la los las un una unos unas de del al y en es son fue fueron era eran ser estar está
        están ha han había habían con por para sin sobre entre que qué quién quiénes cuál cuáles
        dónde cuándo cómo cuánto cuántos cuántas porque se su sus lo le les mi tu yo él ella ellos
        ellas nos muy más pero como también este esta estos estas ese esa hay donde cuando""",
    "it": """il lo la i gli le un uno una di da del della dello dei degli delle al alla allo ai agli
        alle dal dalla nel nella nei nelle sul sulla con tra fra che chi cosa quale quali dove quando
        perché è sono era erano stato stata ha hanno non più ma anche se si questo questa quello
        quella suo sua loro molto e ed quanti quante""",
    "pt": """o os um uma uns umas de da dos das na nos nas em ao à aos pelo pela com por para sem
        sobre entre que quem qual quais onde quando como porque é são foi foram era ser estar está
        estão tem têm não mais mas também se seu sua seus suas ele ela eles elas este esta isso isto
        muito e ou quantos quantas""",
    "nl": """de het een en van op te dat die niet met voor zijn werd worden wordt heeft hebben door
        naar bij uit aan om ook als maar wie wat waar wanneer waarom hoe welke welk deze dit zich hij
        zij ze wij jullie ik je haar hun geen nog wel""",
    "sv": """och i att det som en ett på är av för med till den har de inte om vem vad när hur
        vilken vilket vilka varför han hon jag du ni också från efter eller så blev skulle kan""",
    "da": """og i at det som en et på af for med til den har de ikke om hvem hvad hvor hvornår
        hvordan hvilken hvorfor han hun jeg du sig også fra efter eller blev skulle kan""",
    "no": """og i at det som en et på av for med til den har de ikke om hvem hva hvor når hvordan
        hvilken hvorfor han hun jeg du seg også fra etter eller ble skulle kan""",
    "pl": """i w z na do nie się że jest są był była było byli jak co kto gdzie kiedy dlaczego
        który która które którego od po przez dla przy oraz ale lub czy jego jej ich ten ta tego tym
        jako tak już także został została""",
    "tr": """bir ve bu da de ile için mi mı mu mü ne kim nerede zaman nasıl neden hangi olan olarak
        daha çok gibi kadar sonra önce ama veya değil yok ise şu ben sen biz onlar tarafından""",
    "id": """yang dan di ke dari ini itu dengan untuk adalah pada tidak dalam akan oleh siapa apa
        mana kapan bagaimana mengapa kenapa juga atau sebagai telah sudah karena tersebut bisa saya
        kamu dia mereka kami kita""",
    "ro": """și în de la cu pe din care este sunt fost au un o ce cine unde când cum pentru mai
        dar sau nu se să al ale lui ei""",
    "cs": """a v se na je že to s z do o k jak co kdo kde kdy proč který která které ale nebo jsou
        byl byla bylo by pro od po při také jeho její jejich tak už""",
    "fi": """ja ei se että oli ovat joka mikä kuka missä milloin miten miksi kun myös mutta tai hän
        minä sinä tämä tuo kanssa""",
    "hu": """az egy és hogy nem van volt mint ki mi hol mikor hogyan miért melyik vagy meg már
        csak még ez azt ezt""",
    "vi": """của là và có không được những các một người trong cho với này đã ai gì đâu khi nào
        tại sao như thế""",
    "tl": """ang ng sa mga na ay si ni kay at ito ano sino saan kailan paano bakit hindi""",
}
_ENGLISH_CONTENT = frozenset({"son", "war"})
# What follows an apostrophe in an English contraction or possessive ("John's", "I've", "I'd"):
# English evidence, never Czech "s", Turkish "ve" or French "d" (which comes before one: "d'un").
_CONTRACTIONS = frozenset({"s", "t", "d", "ll", "re", "ve", "m"})

# The letters beyond a-z that each language writes; a lower-case word spelled with them only.
_LETTERS: dict[str, str] = {
    "de": "äöüß",
    "fr": "éèêëàâçîïôûùœæÿ",
    "es": "áéíóúñü",
    "it": "àèéìíòóùú",
    "pt": "áâãàçéêíóôõú",
    "nl": "éëïóèüö",
    "sv": "åäöé",
    "da": "æøåé",
    "no": "æøåéó",
    "pl": "ąćęłńóśźż",
    "tr": "çğıöşüâî",
    "ro": "ăâîșțşţ",
    "cs": "áčďéěíňóřšťúůýž",
    "fi": "äöå",
    "hu": "áéíóöőúüű",
    "vi": "àáâãèéêìíòóôõùúýăđĩũơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ",
}

_LATIN_LANGS: tuple[str, ...] = tuple(_FUNCTION_WORDS)


def _build_lexicon() -> dict[str, tuple[int, ...]]:
    """Lower-case word -> the indexes (in _LATIN_LANGS) of the languages it is a function word of."""
    english = _ENGLISH_STRONG | _ENGLISH_HALF
    lexicon: dict[str, list[int]] = {}
    for index, lang in enumerate(_LATIN_LANGS):
        for word in _FUNCTION_WORDS[lang].split():
            if word not in english and word not in _ENGLISH_CONTENT:
                langs = lexicon.setdefault(word, [])
                if index not in langs:
                    langs.append(index)
    return {word: tuple(langs) for word, langs in lexicon.items()}


_LEXICON = _build_lexicon()
_ES = _LATIN_LANGS.index("es")


@lru_cache(maxsize=4096)
def _spelled_as(letters: frozenset[str]) -> tuple[int, ...]:
    """The languages whose alphabet holds every non-ASCII letter of a word."""
    return tuple(i for i, lang in enumerate(_LATIN_LANGS) if letters <= frozenset(_LETTERS.get(lang, "")))


# ---------------------------------------------------------------------------------------------
# Other scripts: (first code point, last code point, script). Latin and its extensions (and IPA)
# are "latin"; anything not listed (symbols, punctuation) belongs to no script.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x024F, "latin"),
    (0x0250, 0x02AF, "ipa"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0530, 0x058F, "armenian"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0750, 0x077F, "arabic"),
    (0x0900, 0x097F, "devanagari"),
    (0x0980, 0x09FF, "bengali"),
    (0x0A00, 0x0A7F, "gurmukhi"),
    (0x0A80, 0x0AFF, "gujarati"),
    (0x0B80, 0x0BFF, "tamil"),
    (0x0C00, 0x0C7F, "telugu"),
    (0x0C80, 0x0CFF, "kannada"),
    (0x0D00, 0x0D7F, "malayalam"),
    (0x0D80, 0x0DFF, "sinhala"),
    (0x0E00, 0x0E7F, "thai"),
    (0x0E80, 0x0EFF, "lao"),
    (0x0F00, 0x0FFF, "tibetan"),
    (0x1000, 0x109F, "myanmar"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "hangul"),
    (0x1200, 0x139F, "ethiopic"),
    (0x1780, 0x17FF, "khmer"),
    (0x1E00, 0x1EFF, "latin"),
    (0x1F00, 0x1FFF, "greek"),
    (0x3040, 0x309F, "hiragana"),
    (0x30A0, 0x30FF, "katakana"),
    (0x3130, 0x318F, "hangul"),
    (0x3400, 0x4DBF, "han"),
    (0x4E00, 0x9FFF, "han"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xF900, 0xFAFF, "han"),
    (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"),
    (0xFF66, 0xFF9F, "katakana"),
    (0x20000, 0x2FA1F, "han"),
)
_RANGE_STARTS = [start for start, _, _ in _RANGES]

_SCRIPT_LANGUAGE: dict[str, str] = {
    "greek": "el",
    "cyrillic": "ru",
    "armenian": "hy",
    "hebrew": "he",
    "arabic": "ar",
    "devanagari": "hi",
    "bengali": "bn",
    "gurmukhi": "pa",
    "gujarati": "gu",
    "tamil": "ta",
    "telugu": "te",
    "kannada": "kn",
    "malayalam": "ml",
    "sinhala": "si",
    "thai": "th",
    "lao": "lo",
    "tibetan": "bo",
    "myanmar": "my",
    "georgian": "ka",
    "hangul": "ko",
    "ethiopic": "am",
    "khmer": "km",
}
# Scripts written without spaces between words: a word is about this many characters.
_UNSPACED = {"thai": 3, "lao": 3, "khmer": 3, "myanmar": 3, "tibetan": 3}

# Function words (markers of a sentence, not of a name) of the spaced scripts' main languages.
_SCRIPT_MARKERS: dict[str, frozenset[str]] = {
    "cyrillic": frozenset(
        """и в во на с со к ко по из за от до о об у не ни что кто где когда как почему какой какая
        какое какие который которая которые это этот эта был была было были есть ли же а но или для
        при над под чем чей чья чьё сколько он она они мы вы я та те також і та що хто де коли як
        чому який яка які був була було були є не на з у в до від""".split()  # noqa: SIM905
    ),
    "greek": frozenset(
        """ο η το οι τα του της των τον την και να σε στο στη στην στον με για από που ποιος ποια
        ποιο πού πότε πώς γιατί είναι ήταν δεν θα ένα μια""".split()  # noqa: SIM905
    ),
    "arabic": frozenset(
        """في من على إلى الى عن ما من هل متى أين اين كيف لماذا الذي التي هو هي هذا هذه كان كانت
        مع أو او لا لم لن قد و ثم كم أي است در از به که را با این آن چه کی کجا کے کی کا ہے میں سے
        کو""".split()  # noqa: SIM905
    ),
    "hebrew": frozenset("של את על מי מה איפה מתי איך למה הוא היא זה זאת היה הייתה עם או לא גם".split()),  # noqa: SIM905
    "devanagari": frozenset(
        """का की के है हैं था थे थी में से को और कौन क्या कब कहाँ कहां कैसे क्यों ने पर यह वह एक
        भी नहीं आहे""".split()  # noqa: SIM905
    ),
    "hangul": frozenset("누가 무엇 언제 어디 어디서 어떻게 왜 그리고 그 이 는 은 를 을".split()),  # noqa: SIM905
}
# Chinese particles and question words: a run of Han characters with one of them is a sentence.
_ZH_MARKERS = frozenset("的了是吗呢谁哪吧这那们么什怎几在被把给从与也都就很还没你我他她它")
_UKRAINIAN = frozenset("іїєґІЇЄҐ")
_PERSIAN = frozenset("پچژگکی")
_URDU = frozenset("ٹڈڑںےھ")

# Letters with their combining marks (Devanagari vowel signs, Arabic harakat, accents typed as
# marks); digits and underscores never.
_WORD = re.compile(
    r"(?:[^\W\d_]|[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    r"\u06d6-\u06ed\u0900-\u0dff\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff\u3099\u309a])+"
)
# Dropped before reading: URLs, e-mail addresses, "e.g." and "i.e." (their letters are no words).
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\bwww\.\S+", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e)\.", re.I)
_GLUE = frozenset("0123456789_")
# Lower-case words that join the parts of names and titles.
_PARTICLES = frozenset(
    """de da del della delle dei degli di do dos das du des la le les lo van von der den ter ten het
    y e i bin ibn al el zu zum zur af av und et och og l d""".split()  # noqa: SIM905
)
# A sentence's end: "?" (and its forms in other scripts) anywhere, or "." or "!" before a space or
# the end, unless after a capital letter or a capitalised word of two or three letters: an
# initial or an abbreviation ("U.S.", "Mr.", "BWV Anh. 159"), or a name ("E! Hollywood").
_SENTENCE_MARK = re.compile(r"(?<![A-Z])(?<!\b[A-Z][a-z])(?<!\b[A-Z][a-z][a-z])[.!](?:\s|$)|[?;;。？！؟۔।]")
_APOSTROPHES = re.compile("['’]")
_SENTENCE_END = frozenset(".!?¿¡:;\n。！？")


def _script(char: str) -> str:
    code = ord(char)
    i = bisect.bisect_right(_RANGE_STARTS, code) - 1
    if i >= 0 and code <= _RANGES[i][1]:
        return _RANGES[i][2]
    return "other"


@dataclass(frozen=True)
class _LanguageGuess:
    language: str  # what the text reads as, "und" when nothing
    english: bool


def _guess_language(text: str) -> _LanguageGuess:
    """One text: the language it clearly reads as (english=False), else "en" or "und"."""
    if "://" in text or "www." in text:
        text = _URL.sub(" ", text)
    if "@" in text:
        text = _EMAIL.sub(" ", text)
    if "." in text:
        text = _ABBREVIATION.sub(" ", text)
    english = 0.0
    latin_words = 0
    # Latin-script evidence per language: count, and the distinct words that gave it.
    counts = [0] * len(_LATIN_LANGS)
    distinct: list[set[str]] = [set() for _ in _LATIN_LANGS]
    # Other scripts: words (or word-sized runs), sentence markers, and the runs themselves.
    script_words: dict[str, float] = {}
    script_markers: dict[str, int] = {}
    script_text: dict[str, list[str]] = {}

    tokens = [(m.group(), *m.span()) for m in _WORD.finditer(text)]
    size = len(text)
    for k, (token, start, end) in enumerate(tokens):
        if (start and text[start - 1] in _GLUE) or (end < size and text[end] in _GLUE):
            continue  # a piece of an identifier, a code or a number ("73520f08-c78c", "1990s")
        if token.isascii():
            script = "latin"
        else:
            script = next((s for s in map(_script, token) if s != "other"), "other")
        if script not in ("latin", "ipa"):
            _count_script(token, script, words=script_words, markers=script_markers, runs=script_text)
            continue
        if script == "ipa":
            continue
        latin_words += 1
        lower = token.lower()
        # After a letter and an apostrophe: an English contraction or possessive ("John's",
        # "I've"), or the end of a name ("Hold'em"); never a function word of its own.
        glued = start > 1 and text[start - 1] in "'’" and text[start - 2].isalpha()
        if glued and lower in _CONTRACTIONS:
            english += 0.5
            continue
        if lower in _ENGLISH_STRONG:
            english += 1.0
        elif lower in _ENGLISH_HALF:
            english += 0.5
        elif token == "I":
            english += 1.0
        langs: tuple[int, ...] = ()
        is_lower = token.islower()
        if (
            lower in _LEXICON
            and not glued
            and (len(token) > 1 or _single_letter_word(text, start, end))
            and (is_lower or (token.istitle() and _opens_sentence(text, start)))
        ):
            langs = _LEXICON[lower]
        if not langs and is_lower and not token.isascii():
            letters = frozenset(c for c in token if not c.isascii())
            langs = _spelled_as(letters)
        if langs and is_lower and _is_name_particle(text, tokens, k):
            langs = ()
        for i in langs:
            counts[i] += 1
            distinct[i].add(lower)
    for mark in ("¿", "¡"):
        n = text.count(mark)
        if n:
            counts[_ES] += n
            distinct[_ES].add(mark)

    # Without a sentence's punctuation a text may be a name or a title ("Le roi malgré lui",
    # "Mensch ärgere Dich nicht", "我的野蛮女友", "Война и мир"), which English rules can still
    # compare with a passage: such a text needs more, and denser, evidence.
    # A text typed all in lower case ("wer hat marvel comics gegründet") is no title either.
    sentence = text.islower() or _SENTENCE_MARK.search(text) is not None

    # Another script first: it is the clearer signal.
    found = _script_language(
        script_words,
        script_markers,
        runs=script_text,
        latin_words=latin_words,
        english=english,
        sentence=sentence,
    )
    if found is not None:
        return _LanguageGuess(found, False)

    total_words = latin_words + int(sum(script_words.values()))
    best = max(range(len(_LATIN_LANGS)), key=lambda i: (counts[i], len(distinct[i]), -i))
    evidence = counts[best]
    if (
        (total_words >= 4 or (total_words == 3 and evidence >= 3))
        and (sentence or total_words >= 12)
        and evidence >= (2 if sentence else 3)
        and len(distinct[best]) >= 2
        and evidence > 2 * english
        and evidence >= (0.15 if sentence else 0.4) * latin_words
    ):
        return _LanguageGuess(_LATIN_LANGS[best], False)
    return _LanguageGuess("en" if english >= 1 else "und", True)


def _single_letter_word(text: str, start: int, end: int) -> bool:
    """A one-letter word stands alone or is elided ("l'Industrie"), never one letter of an
    abbreviation ("C.R.A.Z.Y.", "J. K. Rowling")."""
    return (start == 0 or text[start - 1] != ".") and (end == len(text) or text[end] != ".")


def _opens_sentence(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t\r\u00a0":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END


def _is_name_particle(text: str, tokens: list[tuple[str, int, int]], k: int) -> bool:
    """A lower-case particle inside a name or title: one to three particles ("de", "la", "van",
    "von", "der", "y", "und", ...) between two capitalised words, separated by spaces only
    ("Charles de Gaulle", "Pedro de la Rosa", "Ludwig van Beethoven", "Tristan und Isolde").
    Not when the capitalised word before is itself a function word ("Die von ...")."""
    lo = k
    while lo > 0 and tokens[lo - 1][0] in _PARTICLES and k - lo < 3:
        lo -= 1
    hi = k
    while hi + 1 < len(tokens) and tokens[hi + 1][0] in _PARTICLES and hi - lo < 3:
        hi += 1
    if tokens[k][0] not in _PARTICLES or lo == 0 or hi + 1 >= len(tokens) or hi - lo >= 3:
        return False
    before, after = tokens[lo - 1], tokens[hi + 1]
    if not (before[0][:1].isupper() and after[0][:1].isupper()):
        return False
    word = before[0].lower()
    if word in _LEXICON or word in _ENGLISH_STRONG or word in _ENGLISH_HALF:
        return False
    span = text[before[2] : after[1]]
    return _APOSTROPHES.sub("", span.replace(" ", "")) == "".join(t for t, _, _ in tokens[lo : hi + 1])


def _count_script(
    token: str,
    script: str,
    words: dict[str, float],
    markers: dict[str, int],
    runs: dict[str, list[str]],
) -> None:
    if script in ("han", "hiragana", "katakana"):
        # Chinese and Japanese: every character is about a word; a run may mix the three.
        for char in token:
            s = _script(char)
            key = "cjk" if s in ("han", "hiragana", "katakana") else s
            if key == "cjk":
                words["cjk"] = words.get("cjk", 0) + 1
                if s == "hiragana":
                    markers["hiragana"] = markers.get("hiragana", 0) + 1
                elif char in _ZH_MARKERS:
                    markers["cjk"] = markers.get("cjk", 0) + 1
        return
    size = _UNSPACED.get(script)
    words[script] = words.get(script, 0) + (max(1.0, len(token) / size) if size else 1.0)
    if token.lower() in _SCRIPT_MARKERS.get(script, ()):
        markers[script] = markers.get(script, 0) + 1
    runs.setdefault(script, []).append(token)


def _script_language(
    words: dict[str, float],
    markers: dict[str, int],
    runs: dict[str, list[str]],
    latin_words: int,
    english: float,
    sentence: bool,
) -> str | None:
    if not words:
        return None
    script = max(words, key=lambda s: (words[s], s))
    n = words[script]
    if n < latin_words or n <= 2 * english:
        return None
    if script == "cjk":
        hiragana = markers.get("hiragana", 0)
        if hiragana >= 4 and n >= (6 if sentence else 8):
            return "ja"
        if (markers.get("cjk", 0) >= (1 if sentence else 2) and n >= (4 if sentence else 8)) or n >= 12:
            return "ja" if hiragana else "zh"
        return None
    if sentence:
        enough = (n >= 2 and markers.get(script, 0) >= 1 and n + latin_words >= 3) or n >= 4
    else:
        enough = (n >= 4 and markers.get(script, 0) >= 1) or n >= 6
    if not enough:
        return None
    language = _SCRIPT_LANGUAGE.get(script, "und")
    letters = set("".join(runs.get(script, ())))
    if script == "cyrillic" and letters & _UKRAINIAN:
        return "uk"
    if script == "arabic" and letters & _URDU:
        return "ur"
    if script == "arabic" and letters & _PERSIAN:
        return "fa"
    return language if language != "und" else None


def _describe(language: str, index: int, total: int) -> str:
    which = "the text" if total == 1 else f"text {index + 1} of {total}"
    return f"{which} reads as {LANGUAGE_NAMES.get(language, language)} ({language})"


def check_language(*texts: str) -> LanguageCheck:
    """Whether the diagnosis's English rules apply to these texts (a query, a response, ...).

    Each text is read on its own, in the order given; the first that clearly reads as another
    language decides (english=False, its language, a reason naming it by position). Otherwise
    english=True, with language "en" when any text shows English function words, else "und"
    (numbers, names, codes, empty texts: nothing to tell, and nothing that stops the rules)."""
    seen_english = False
    for index, text in enumerate(texts):
        reading = _guess_language(text)
        if not reading.english:
            return LanguageCheck(reading.language, False, _describe(reading.language, index, len(texts)))
        seen_english = seen_english or reading.language == "en"
    return LanguageCheck("en" if seen_english else "und", True, None)
