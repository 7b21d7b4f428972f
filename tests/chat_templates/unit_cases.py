#!/usr/bin/env python3
"""The Jinja unit cases (testdata/chat-templates/unit_cases.json): one small template per
statement, filter, test, method and whitespace rule, with the text Python's jinja2 renders
(configured as transformers configures it, reference.py). `--write` regenerates the file;
without it, checks that the committed expectations still match jinja2 (run by ctest's
chat_templates_test). src/template/jinja_test.cpp renders every case with Pagoda.

Cases marked "pagoda" hold what Pagoda renders where transformers' sandbox refuses on
purpose (list.append): their text is ours, not jinja2's."""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import reference  # noqa: E402

C = {"xs": [3, 1, 2], "s": "  Hello World  ", "d": {"b": 2, "a": 1, "c": None},
     "people": [{"name": "Ann", "age": 31, "role": "user"}, {"name": "bob", "age": 25, "role": "assistant"},
                {"name": "Cy", "age": 31, "role": "user"}],
     "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
     "u": "naïve 日本 ✓", "n": None, "f": 2.5, "t": True}

CASES = [
    # statements
    ("if_elif_else", "{% for x in xs %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %};{% endfor %}"),
    ("for_loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}"),
    ("for_prev_next", "{% for x in xs %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }} {% endfor %}"),
    ("for_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"),
    ("for_if_filter", "{% for p in people if p.age > 30 %}{{ p.name }}{{ loop.length }} {% endfor %}"),
    ("for_unpack_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"),
    ("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}"),
    ("for_string_chars", "{% for c in 'abc' %}[{{ c }}]{% endfor %}"),
    ("loop_cycle", "{% for x in xs %}{{ loop.cycle('odd', 'even') }} {% endfor %}"),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("set_scoping", "{% set y = 1 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}"),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}"),
    ("namespace", "{% set ns = namespace(total=0, seen=[]) %}{% for x in xs %}{% set ns.total = ns.total + x %}{% endfor %}{{ ns.total }}"),
    ("set_block_filtered", "{% set block | upper %}  hello {{ 'there' }} {% endset %}[{{ block }}]"),
    ("filter_block", "{% filter upper | trim %}  shout {{ s }} {% endfilter %}"),
    ("macro_defaults", "{% macro greet(name, greeting='Hi', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', punct='?') }}"),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs | list }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}"),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}"),
    ("macro_sees_globals", "{% set g = 'global' %}{% macro m() %}{{ g }}{{ xs | length }}{% endmacro %}{{ m() }}"),
    ("call_caller", "{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}{% call box('T') %}inside {{ xs[0] }}{% endcall %}"),
    ("call_with_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each(xs) %}<{{ x }}>{% endcall %}"),
    ("generation_block", "a{% generation %}b{{ xs[0] }}{% endgeneration %}c"),
    # whitespace control
    ("trim_blocks", "{% if t %}\nyes\n{% endif %}\nend"),
    ("lstrip_blocks", "line\n    {% if t %}\n    in\n    {% endif %}\nout"),
    ("minus_both_sides", "a  \n  {%- if t -%}  \n  b  \n  {%- endif -%}  \n  c"),
    ("expression_minus", "x   {{- 'y' -}}   z"),
    ("plus_disables_lstrip", "line\n    {%+ if t %}in{% endif %}"),
    ("comment_whitespace", "a\n  {#- a comment -#}\n  b\n{# kept #}\nc"),
    ("trailing_newline_dropped", "text\n"),
    # expressions
    ("slices", "{{ xs[::-1] }}{{ xs[1:] }}{{ xs[:-1] }}{{ 'hello'[1:4] }}{{ u[::-1] }}{{ u[1:3] }}"),
    ("conditional", "{{ 'a' if t else 'b' }}{{ 'c' if n else 'd' }}{{ 'e' if n }}"),
    ("in_not_in", "{{ 1 in xs }}{{ 5 not in xs }}{{ 'ell' in 'hello' }}{{ 'a' in d }}{{ 'role' in msgs[0] }}"),
    ("concat_plus_tilde", "{{ 'a' + 'b' }}{{ 'n' ~ 1 ~ none ~ true }}{{ [1] + [2] }}"),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 8 }} {{ 1.5 * 2 }} {{ 10 / 4 }} {{ 'ab' * 3 }}"),
    ("comparison_chain", "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' < 'b' }}{{ 1 == 1.0 }}"),
    ("printing_values", "{{ d }} {{ xs }} {{ n }} {{ t }} {{ f }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ [\"it's\", 'q\"'] }}"),
    ("string_escapes", "{{ 'a\\nb\\t\\\\' }}|{{ \"\\u00e9\" }}|{{ '\\d' }}"),
    ("precedence", "{{ 1 + 2 * 3 }}{{ not t or t }}{{ -2 ** 2 }}{{ 'x' ~ 2 * 3 }}{{ (1 + 2) ~ 'y' }}"),
    ("in_place_reads", "{{ -xs[0] | abs }}{{ (xs + [9]) | length }}{{ msgs[1]['content'] | upper }}{{ msgs[-1].role }}{{ (xs)[0] }}{{ [1, 2][1] }}{{ xs[1:][0] }}{{ -f | abs }}{{ d.b - xs[2] }}"),
    ("undefined_prints_empty", "[{{ missing }}][{{ d.missing }}][{{ missing | default('dflt') }}]"),
    # tests
    ("tests_types", "{{ n is none }}{{ s is string }}{{ d is mapping }}{{ xs is iterable }}{{ xs is sequence }}{{ 1 is number }}{{ 1 is integer }}{{ f is float }}{{ t is boolean }}{{ t is true }}{{ n is false }}"),
    ("tests_defined", "{{ missing is defined }}{{ missing is undefined }}{{ xs is defined }}{{ d.c is none }}"),
    ("tests_values", "{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ 3 is even }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 2 is in xs }}{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ none is sameas none }}"),
    ("tests_not", "{{ 'x' is not string }}{{ n is not none }}"),
    # filters
    ("tojson_forms", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ u | tojson }}|{{ u | tojson(ensure_ascii=true) }}|{{ xs | tojson(separators=(',', ':')) }}|{{ f | tojson }}"),
    ("trim_filter", "[{{ s | trim }}][{{ 'xxhixx' | trim('x') }}]"),
    ("join_filter", "{{ xs | join(', ') }}|{{ people | join('/', attribute='name') }}|{{ xs | join }}"),
    ("map_filter", "{{ people | map(attribute='name') | list }}{{ ['a', 'b'] | map('upper') | join }}{{ people | map(attribute='missing', default='-') | list }}"),
    ("selectattr_rejectattr", "{{ people | selectattr('role', 'equalto', 'user') | map(attribute='name') | join(',') }}|{{ people | rejectattr('role', 'equalto', 'user') | map(attribute='name') | join(',') }}|{{ msgs | selectattr('content') | list | length }}"),
    ("select_reject", "{{ range(6) | select('odd') | list }}{{ range(6) | reject('odd') | list }}{{ [0, 1, '', 'a'] | select | list }}"),
    ("length_count", "{{ xs | length }}{{ d | length }}{{ u | length }}{{ s | count }}"),
    ("default_filter", "[{{ missing | default('x') }}][{{ '' | default('y') }}][{{ '' | default('z', true) }}][{{ n | d('w', boolean=true) }}]"),
    ("items_dictsort", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d | dictsort(reverse=true) %}{{ k }}{% endfor %}|{% for k, v in {'b': 1, 'a': 2} | dictsort(by='value') %}{{ k }}{% endfor %}"),
    ("unique_filter", "{{ [1, 2, 1, 3, 2] | unique | list }}{{ ['a', 'A', 'b'] | unique | list }}{{ people | unique(attribute='age') | map(attribute='name') | list }}"),
    ("replace_filter", "{{ 'aaa' | replace('a', 'b') }}{{ 'aaa' | replace('a', 'b', 2) }}"),
    ("case_filters", "{{ 'hello wORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'hello wORLD-x' | title }} {{ 'hELLO world' | capitalize }}"),
    ("first_last_list", "{{ xs | first }}{{ xs | last }}{{ 'abc' | first }}{{ 'abc' | list }}"),
    ("int_float_string", "{{ '42' | int }}{{ '4.7' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}{{ '2.5' | float }}{{ 5 | string }}{{ none | string }}"),
    ("round_filter", "{{ 2.567 | round }}{{ 2.567 | round(2) }}{{ 2.5 | round(0, 'floor') }}{{ 2.1 | round(0, 'ceil') }}{{ 3 | round }}"),
    ("safe_escape", "{{ '<b>' | safe }}{{ '<b>' | e }}{{ '<b>' | escape | safe }}{{ ('x' | safe) + '<y>' }}{{ '<z>' + ('w' | safe) }}{{ ('a' | safe) ~ '<b>' }}"),
    ("indent_filter", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}"),
    ("sort_reverse_sum", "{{ xs | sort }}{{ xs | sort(reverse=true) }}{{ people | sort(attribute='name') | map(attribute='name') | list }}{{ xs | reverse | list }}{{ xs | sum }}{{ people | sum(attribute='age') }}"),
    ("min_max_abs", "{{ xs | min }}{{ xs | max }}{{ -3 | abs }}{{ ['b', 'A', 'c'] | max }}"),
    ("center_wordcount", "[{{ 'ab' | center(6) }}]{{ 'one two  three' | wordcount }}"),
    ("attr_filter", "{{ d | attr('a') }}{{ msgs[0] | attr('role') }}"),
    # methods
    ("string_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\\n\\nhi\\n'.lstrip('\\n') }}]"),
    ("string_split", "{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ 'x</think>y</think>z'.split('</think>')[-1] }}"),
    ("string_affixes", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('x') }}"),
    ("string_case_methods", "{{ 'ab cd'.upper() }}{{ 'AB'.lower() }}{{ \"they're bill's\".title() }}{{ 'aBC'.capitalize() }}"),
    ("string_replace_format", "{{ 'a-b-c'.replace('-', '+') }}{{ 'a-b-c'.replace('-', '', 1) }}{{ '{} and {}'.format(1, 'two') }}{{ '{0}{name}'.format('x', name='y') }}"),
    ("string_join_find_count", "{{ ', '.join(['a', 'b']) }}{{ 'hello'.find('l') }}{{ 'hello'.find('z') }}{{ 'hello'.count('l') }}"),
    ("dict_methods", "{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 'dflt') }}{{ d.keys() | list }}{{ d.values() | list }}{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}"),
    ("list_methods", "{{ xs.index(2) }}{{ xs.count(3) }}"),
    # globals
    ("range_global", "{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(5, 0, -2) | list }}"),
    ("dict_global", "{{ dict(a=1, b='x') }}{{ namespace(a=1).a }}"),
    ("strftime_now", "{{ strftime_now('%Y-%m-%d %A %d %b %Y %B') }}"),
    ("strftime_now_defined", "{{ strftime_now is defined }}{{ raise_exception is defined }}"),
    # errors: the same failure in both
    ("raise_exception", "{% if t %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}"),
    ("undefined_attribute_error", "{{ missing.attr }}"),
    ("type_error", "{{ 'a' + 1 }}"),
]

PAGODA_ONLY = [
    # transformers' ImmutableSandboxedEnvironment refuses list.append (SecurityError);
    # Pagoda allows it, as llama.cpp's engine does, so templates written for either work.
    ("list_append", "{% set l = [] %}{% set _ = l.append(1) %}{% set ns = namespace(items=[]) %}{% set _ = ns.items.append('a') %}{{ l }}{{ ns.items }}", "[1]['a']"),
]


def render_all():
    out = []
    for name, tmpl in CASES:
        env = reference.make_env("2026-07-26")
        try:
            text = env.from_string(tmpl).render(**C)
            out.append({"name": name, "template": tmpl, "expect": text})
        except reference.Raised as e:
            out.append({"name": name, "template": tmpl, "raises": str(e)})
        except Exception as e:  # noqa: BLE001 - any error, as Pagoda must fail too
            out.append({"name": name, "template": tmpl, "error": f"{type(e).__name__}: {e}"})
    for name, tmpl, text in PAGODA_ONLY:
        out.append({"name": name, "template": tmpl, "expect": text, "pagoda": True})
    return {"context": C, "date": "2026-07-26", "cases": out}


def main():
    path = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "chat-templates" / "unit_cases.json"
    fresh = render_all()
    if "--write" in sys.argv:
        path.write_text(json.dumps(fresh, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path} ({len(fresh['cases'])} cases)")
        return
    stored = json.loads(path.read_text(encoding="utf-8"))
    if stored != fresh:
        bad = [c["name"] for c, f in zip(stored["cases"], fresh["cases"]) if c != f]
        print(f"FAIL unit_cases.json is stale against jinja2 {reference.jinja2.__version__}: {bad or 'case list'}"
              " (regenerate: tests/chat_templates/unit_cases.py --write)")
        sys.exit(1)
    print(f"unit cases: {len(stored['cases'])} match jinja2 {reference.jinja2.__version__}")


if __name__ == "__main__":
    main()
